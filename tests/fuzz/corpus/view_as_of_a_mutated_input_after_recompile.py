"""`x0.add_(x0); return x0.view_as(x0)`: eager returns a view of the caller's tensor; after
the second call's recompile (automatic dynamic: x0's last size changed) refcomp returned a
copy, since a returned view with dynamic sizes was always a graph output (found by the
autocast fuzz, tests/frontend/test_fuzz_autocast.py; the same without autocast).  Fixed: a
view with the input's own layout is rebuilt from the caller's tensor whatever its sizes
(spec/correctness.md, Note [Returned views])."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with input: [], eager [0]"
SOURCE = '''
def f(x0, x1, x2):
    v1 = torch.abs(x0)
    x0.add_(x0)
    v4 = x0.view_as(x0)
    return v4,
'''
INPUTS = [
    [((1, 1, 1, 1), 'float32', 'contiguous', 0), ((), 'float32', 'contiguous', 0), ((), 'float32', 'contiguous', 0)],
    [((1, 1, 1, 2), 'float32', 'contiguous', 1), ((), 'float32', 'contiguous', 1), ((), 'float32', 'contiguous', 1)],
]
