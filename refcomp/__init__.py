"""refcomp: a small, heavily specified reference compiler for PyTorch programs.

The user-facing compiler (frontend, guards, cache, backends glue) lives here; it
imports ir/ and codegen/, never the other way round.  Spec: spec/architecture.md.
"""
