"""A false raise in backward (interp, eager, llvm; gradient mode): `v4 = v3 * 1` and
`v4 / v4` in a graph that runs on the eager backend (cumsum of a 0-d value is an opaque
ATen call without a VJP), then `v3.relu_()`.  Eager's div saves v4, a tensor of its own,
so nothing raises; `simplify` folded `v3 * 1` into v3, so ATen's div saved the very
tensor the caller then changed, and the backward raised "one of the variables needed for
gradient computation has been modified by an inplace operation".  Found by the thorough
gradient loop (Nov 27, main dd22b79, program 265).  Fixed: a graph that records autograd
op by op runs only `dce` (Note [Composites under autograd], refcomp/runtime.py)
(issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v2 = x0.max()
    v3 = v2.cumsum(-1)
    v4 = v3 * 1
    v11 = v4 / v4
    v3.relu_()
    return [v11, x0 * 2]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 3), 'float32', 'contiguous', 356)],
    [((1, 5), 'float32', 'contiguous', 357)],
]
