"""A NaN gradient where eager's is 0 (every backend): `v4.std(-1, correction=0,
keepdim=True)` of a 0-d float64 input (std 0).  ATen's std_backward divides by 2 * std
and masks the result where std == 0 (`masked_fill_(result == 0, 0)`), so the gradient
is 0; refcomp traces std as sqrt(var), whose VJP is g / (2 * sqrt(var)) = inf at 0, and
inf * (x - mean) = inf * 0 = NaN.  Found by the gradient soak (`--grad --seed 5`, Nov 27;
2 programs of 1,854 per backend).  Fixed: under grad std is traced as
`where(var == 0, 0 * var, sqrt(where(var == 0, 1, var)))`, whose gradient is 0 where std
is 0, as eager's mask (refcomp/tracer/torch_ops.py, _var_builder)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0, x1):
    v4 = x0.squeeze(-1)
    v5 = v4.std(-1, correction=0, keepdim=True)
    return x1, v5,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'float64', 'contiguous', 89), ((), 'float64', 'contiguous', 293, 'shifted')],
]
