"""A returned view of an input, after the second call recompiles with a dynamic size: the
interp backend returns a copy (wrong strides for `.t()`, no aliasing), llvm returns the
input object itself instead of a view.  Fixed: llvm by outputs_to_rewrap; interp (Nov 24) by
rebuilding a view with the input's own layout from the caller's tensor whatever its sizes
(spec/correctness.md, Note [Returned views])."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: call 1: out[0] shares no storage with x0 (interp) / is x0 (llvm)"
SOURCE = '''
def f(x0):
    v1 = torch.abs(x0)
    v2 = x0.view_as(x0)
    return v2,
'''
INPUTS = [
    [((1, 2), 'float32', 'contiguous', 0)],
    [((3, 2), 'float32', 'contiguous', 0)],
]
