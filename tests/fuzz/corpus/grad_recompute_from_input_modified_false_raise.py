"""A false raise in backward (interp, llvm; gradient mode): `v2 = v1.exp().sum(0)` in a
graph whose input is v1, then `v1.mul_(2)` after it.  Eager's exp saves its result, not
v1, so its backward runs.  refcomp's partition recomputed exp(v1) in the backward, so
the compiled Function saved v1 with save_for_backward and autograd's version check
raised "one of the variables needed for gradient computation has been modified by an
inplace operation".  A known gap (spec/autograd.md listed it as not matched), made a
regression program on Nov 27 (main bcff9f3).  Fixed: no value is recomputed from a
forward input that no eager node saves (Note [Caller tensors eager does not save],
spec/autograd.md); the exp is saved as eager saves it (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-false-raise: refcomp raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0, x1):
    v1 = x0 * 2
    print(end='')
    v2 = v1.exp().sum(0)
    v3 = torch.relu(v1 + x1).mean()
    print(end='')
    v1.mul_(2)
    return v2, v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'float32', 'contiguous', 0), ((4,), 'float32', 'contiguous', 1)],
    [((2, 5), 'float64', 'contiguous', 2), ((5,), 'float64', 'contiguous', 3)],
]
