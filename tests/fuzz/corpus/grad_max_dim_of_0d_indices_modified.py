"""A missed raise in backward (interp, eager, llvm): `v3, v4 = v1.max(0)` of a 0-d v1 (here
aminmax's min), then `v4.mul_(2)` on the indices.  Eager's MaxBackward saves the indices
of a 0-d input too, so its backward raises "one of the variables needed for gradient
computation has been modified by an inplace operation"; refcomp builds a 0-d max(dim) as
`x * 1` beside argmax, which saves no index, and returned a gradient.  Found by the
thorough gradient profile's hypothesis test on llvm (Nov 27, main 46e0a55).  Fixed: that
case declares eager's saves (`TraceContext.eager_saves`: the indices) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    v1, v2 = torch.aminmax(x0)
    v3, v4 = v1.max(0)
    v4.mul_(2)
    v5, v6 = x0.sum().min(0)
    return v3, v5
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 1), 'float32', 'contiguous', 0)],
    [((2, 3), 'float32', 'contiguous', 1)],
]
