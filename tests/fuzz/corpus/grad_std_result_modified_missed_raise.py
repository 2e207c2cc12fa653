"""A missed raise in backward (interp, eager, llvm): `v4 = x0.std()` then
`v4.index_fill_(0, torch.tensor([0]), 2)` (a graph break), v4 returned.  Eager's
StdBackward saved its input and result, so its backward raises "one of the variables
needed for gradient computation has been modified by an inplace operation"; refcomp
builds std from var, sqrt and where (corpus grad_std_of_constant), and `where` saves no
result, so the boundary checks of Note [Saved by eager] missed it.  Found by the
gradient soak (`--grad --seed 5`, Nov 27, 3 programs of 1,942 per backend).  Fixed: the
std builder declares eager's saves (TraceContext.eager_saves: input and result), as the
vector norms do."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    v1 = x0.nansum(0)
    v4 = x0.std()
    v4.index_fill_(0, torch.tensor([0]), 2)
    v5 = torch.hstack([v4, v4])
    return v4, x0, v5,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'float64', 'contiguous', 12)],
    [((), 'float64', 'contiguous', 13)],
]
