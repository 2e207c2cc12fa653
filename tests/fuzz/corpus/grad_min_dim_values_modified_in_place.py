"""A crash in backward (every backend): `v1, v2 = x0.min(dim=-1)` then `v1.copy_(x0)`
(a graph break) of a 0-d input requiring grad: "one of the variables needed for gradient
computation has been modified by an inplace operation: ... output 0 of CompiledFunction".
Eager's min(dim) backward saves the indices, not the values, so modifying the values
is allowed there.  Found by the gradient soak (`--grad --seed 2`, llvm, Nov 27).  Cause:
refcomp traced the values as `amin`, whose VJP reads its result, so the partitioner
saved the returned values.  Fixed with grad_max_dim_ties: under grad the values are
gathered at the indices (a 0-d input: `x * 1`), whose VJP reads only the indices."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0, x1):
    v1, v2 = x0.min(dim=-1)
    v1.copy_(x0)
    v4 = torch.maximum(x0, v2)
    v4.unsqueeze_(0)
    v4.mul_(3)
    v5 = v4 ** 2
    w1, w2 = x1.max(0)
    w1.mul_(2)
    return v5, v4, v1, w1
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'float32', 'contiguous', 871), ((3, 2), 'float64', 'contiguous', 1)],
    [((), 'float32', 'contiguous', 872), ((3, 2), 'float64', 'contiguous', 2)],
    [((), 'float32', 'contiguous', 873), ((4, 2), 'float64', 'contiguous', 3)],
]
