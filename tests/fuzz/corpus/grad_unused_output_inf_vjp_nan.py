"""A NaN gradient where eager's is finite (interp, llvm): `v1 = x0.var(correction=2)` of
two elements beside `v2 = x0 * 3`, both outputs of one graph (a break follows); the
loss reads only v2 (v1 feeds a comparison).  Eager
never runs v1's backward; refcomp's compiled Function has one backward for all its
outputs, and an output that got no gradient gets zeros there (Note [Unused gradients]),
so var's VJP computes 2 / (N - correction) * 0 = inf * 0 = NaN and adds it to x0's
gradient.  Found while fixing grad_var_correction_above_count (Nov 27), by hand; the
gradient mode weights every returned float output, so only a graph's outputs that the program
itself consumes after a break can be unused.  Fixed: the backward that runs is derived
from the given gradients only (Note [Given gradients], spec/autograd.md: one backward graph
per set of given gradients, built and compiled on first use, reading the tensors the
forward saved), so var's VJP is not in it."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0):
    v1 = x0.var(correction=2)
    v2 = x0 * 3
    v3 = OPAQUE(v1) > 0
    return v2, v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2,), 'float32', 'contiguous', 0)],
]
