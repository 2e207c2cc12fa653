"""A gradient of 0 where eager's is NaN (interp, llvm): `x1.var(dim=-1, correction=2)` of
a 0-d x1 (N - correction = -1), its `max(0, True).values` returned beside others (and
`x0.var(correction=2)` of two elements: -inf and inf where eager's are inf, also on the
eager backend once sizes are dynamic, where the VJP path falls back to it).  ATen's
var_backward has two rules: for a 0-d input or a reduction over every dim without `dim`,
N - correction <= 0 gives grad * where(x == mean, NaN, inf); with `dim` given it divides
by N - correction (corpus grad_var_correction_above_count: -0).  refcomp's VJP used the
second rule for both, and the eager backend called torch.var with every dim named.  Found by the thorough gradient profile (REFCOMP_HYPOTHESIS=thorough,
the 1,000-program loop, program 916 on interp and llvm, Nov 27); the eager backend runs
the ATen op.  Fixed in _var_vjp (ir/ops/reduction.py, both rules, by rank and
whether `dims` is empty) and the eager backend (dims=() is torch.var without `dim`)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0, x1):
    v2 = x1.var(dim=-1, correction=2)
    v3 = x1.clamp(max=2.0)
    v8 = torch.max(v2, 0, True).values
    v9 = x0.var(correction=2)
    return [v3, v8, v9]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2,), 'float64', 'contiguous', 615), ((), 'float64', 'contiguous', 6, 'shifted')],
    [((2,), 'float64', 'contiguous', 616), ((), 'float64', 'contiguous', 7, 'shifted')],
    [((3,), 'float64', 'contiguous', 617), ((), 'float64', 'contiguous', 8, 'shifted')],
]
