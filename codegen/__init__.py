"""Code generation: from optimized IR to something that runs.

Imports ir/; never refcomp/.  Spec: spec/codegen.md.
"""
