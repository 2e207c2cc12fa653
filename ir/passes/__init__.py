"""IR passes: one module per pass, each `Graph -> Graph` with a stated contract.

Spec: spec/passes.md.  Passes register by name in `ir.passes.registry`.
"""
