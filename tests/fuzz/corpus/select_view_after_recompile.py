"""`return x2.select(0, 0)` after a recompile that made x2's first size symbolic (1, then 2):
eager returns a view of x2; refcomp returns a copy (a graph output), because a returned
view whose sizes are dynamic is rebuilt from the caller's tensor only when it has the
input's own layout (Note [Returned views], spec/correctness.md).  Found by the autocast
fuzz (tests/frontend/test_fuzz_autocast.py), the same without autocast; a movedim of an
input shows it too.  Fixed: the traced view ops (TensorVar.view_steps) run again on the
caller's tensor with the call's sizes."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: call 1: out[0] shares storage with input: [], eager [2]"
SOURCE = '''
def f(x0, x1, x2):
    v2 = torch.abs(x0)
    v3 = x2.select(0, 0)
    return v3,
'''
INPUTS = [
    [((1, 1), 'float32', 'contiguous', 0), ((), 'float32', 'contiguous', 0), ((1, 1), 'float32', 'contiguous', 0)],
    [((1, 1), 'float32', 'contiguous', 1), ((), 'float32', 'contiguous', 1), ((2, 1), 'float32', 'contiguous', 1)],
]
