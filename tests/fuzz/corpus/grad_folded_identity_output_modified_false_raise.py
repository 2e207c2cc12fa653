"""A false raise (interp, llvm; gradient mode): `v1 = x0.exp() * 1`, a graph break, then
`v1.add_(1)`. Eager's v1 is a tensor of its own that no node saved (ExpBackward saves
exp's result, MulBackward of a number nothing), so its backward runs; refcomp's raised
"one of the variables needed for gradient computation has been modified by an inplace
operation": the compiled Function's forward folds `* 1` into exp's result, which its
backward reads, so the caller's v1 was the very tensor the Function saved. Pre-existing
(issue 33). Fixed: an output sharing a tensor the Function saves, where eager's backward
saves no such output, is cloned (Note [Tensors the Function holds],
refcomp/aliasing.py)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v1 = x0.exp() * 1
    s2 = v1.sum().item()
    v1.add_(1)
    return v1
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 3), 'float64', 'contiguous', 13)],
]
