"""A crash where eager runs (llvm; gradient mode): `fuse produced a cyclic region graph`,
an internal assertion of the fusion pass, on the backward of a training-mode
`F.batch_norm` followed by `var` over dims (1, 3), at a second call's new sizes (dynamic).
Found by the session-11 gradient soak (seed 2111, program 12,192, on f2fa174).  The
cycle check followed node paths only: a region joined by the reader of a value, whose
other member fed that value's new region, was missed.  Fixed: a path that reaches one
member of another group goes on from all its members (spec/fusion.md, rule 5;
tests/fusion/test_fuse.py) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["llvm"]
SYMPTOM = "grad-crash: AssertionError: fuse produced a cyclic region graph"
SOURCE = '''
def f(x0):
    v1 = x0.repeat(2, *([1] * x0.dim()))
    v2 = v1.diagonal()
    v3 = F.batch_norm(x0, None, None, training=True)
    v4 = torch.var(v3, dim=(1, 3))
    v5 = v4.contiguous()
    return v1, v5,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 1, 4, 3), 'float64', 'contiguous', 798)],
    [((2, 1, 4, 3), 'float64', 'contiguous', 799)],
    [((4, 1, 4, 4), 'float64', 'contiguous', 800)],
]
