"""A wrong gradient (all backends; gradient mode): `torch.amax(x0).std()` (a single
element: NaN, and a NaN gradient).  ATen's amax backward multiplies its share by the
mask, so the NaN reaches every element (NaN * 0); refcomp recorded `torch.amax(x)` as the
IR of `x.max()` (`amax` with dims=()), whose backward (evenly_distribute_backward) leaves
the elements that are not the maximum exactly 0.  Noticed in session 12 beside
`grad_full_min_nan_gradient_eager` (documented then, not matched).  Fixed: the tracer
records `torch.amax(x)` and `torch.amin(x)` over every dim, named, and `dims=()` stays
x.max()'s (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0):
    v1 = torch.amax(x0)
    v2 = x0.amin(())
    v3 = v1.std() + v2.std()
    return v3, x0
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'float32', 'contiguous', 5)],
    [((2, 3, 2), 'float64', 'transposed', 6)],
]
