"""Two outputs where one is a view of the other (`v1`, `v1.reshape(-1)`): eager returns
tensors sharing storage; the interp backend returns independent copies, and since main's
"outputs are fresh" change (2c2c746) eager and llvm do too.  Fixed on eager and llvm
(aliasing: only cast/clamp count as identity-capable); on interp (Nov 24) by rebuilding
the view from the base's output (Note [Views of outputs], spec/correctness.md)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with: [], eager ['out[1]']"
SOURCE = '''
def f(x0):
    v1 = torch.abs(x0)
    v3 = v1.reshape(-1)
    return v1, v3
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
