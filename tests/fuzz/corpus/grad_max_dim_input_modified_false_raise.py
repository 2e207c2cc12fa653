"""A false raise in backward (interp, eager, llvm): `v2 = v1.max(1).values`, a break, then
`v1.mul_(2)` on max's input.  Eager's MaxBackward saves only the indices, so its backward
runs; refcomp builds max(dim) under grad as a gather at argmax's indices, and gather's
node saves its input, so the backward raised "one of the variables needed for gradient
computation has been modified by an inplace operation" (on the eager backend from
ATen's GatherBackward, on the others from refcomp's version checks).  Found reviewing the
open items of tests/training/test_saved_by_eager.py (Nov 27, main 46cce04).  Fixed: the
gather declares eager's saves (`TraceContext.eager_saves`: the indices), counted instead
of gather's own (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-false-raise: refcomp raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    v1 = x0 * 2
    v2 = v1.max(1).values
    print(end='')
    v1.mul_(2)
    v3 = v1.min(0)[0]
    return v2, v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'float32', 'contiguous', 0)],
    [((2, 5), 'float64', 'contiguous', 1)],
]
