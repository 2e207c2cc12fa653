"""Wrong gradient (every backend) at ties: `x1.max(0).values` of an expanded input (every
element of the reduced dim equal).  Eager's `max(dim)` backward gives each result's
whole gradient to the element at the index it returns (the first of the ties); refcomp
shared it evenly among the ties, as eager does for `amax` and `max()` without a dim.
Found by the gradient soak (`--grad --seed 2`, interp and llvm, Nov 27; 14 programs).
Cause: `torch.max/min(x, dim)` were traced as `amax/amin` (whose VJP shares) beside
`argmax/argmin`.  Fixed: with grad the values are gathered at the indices
(refcomp/tracer/torch_ops.py, `_minmax_builder`); `amax`, `max()`, `aminmax` still
share, as eager's do."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0, x1):
    v4 = x1.max(0).values
    v5 = torch.min(x0, -1, keepdim=True)[0]
    v6 = x0.amax(0)
    return x0, v4, v5, v6
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 4), 'float32', 'contiguous', 442), ((3, 4), 'float32', 'expanded', 952)],
    [((4, 5), 'float64', 'expanded', 443), ((3, 5), 'float32', 'expanded', 953)],
]
