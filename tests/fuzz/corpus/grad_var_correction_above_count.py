"""A NaN gradient where eager's is -0 (every backend): `x0.var(dim=0, correction=2)` of
one element (N - correction = -1).  ATen's forward divides by max(N - correction, 0)
(NaN here), its backward by N - correction: 2 / (N - correction) * g * (x - mean) = -0.
refcomp's VJP used inf for every N <= correction (inf * 0 = NaN), and the `decompose`
pass (the eager backend) rewrote var as sum / max(N - correction, 0), whose derivative
divides by 0.  Found by the gradient mode's CI test after main's generator changed
(Nov 27, derandomized).  Fixed: the VJP divides by N - correction unless it is 0
(ir/ops/reduction.py, _var_vjp) and var with N < correction is not decomposed
(ir/passes/decompose.py)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0, x1):
    v1 = x0.var(dim=0, correction=2)
    v2 = x1.std(-1, correction=3)
    return v1, v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1,), 'float32', 'contiguous', 0), ((2, 2), 'float64', 'contiguous', 0)],
]
