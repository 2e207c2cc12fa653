"""A gradient where eager has None (interp and llvm): `s3 = x1.sum().item()` beside a
returned `x0[torch.tensor([0, -1])]`.  The loss does not depend on x1, so eager's
`autograd.grad(..., allow_unused=True)` gives None for it (and `.grad` would stay None,
which optimizers treat differently from zeros); refcomp gave a zero tensor.  Found by the
first CI run of the gradient mode (derandomized, Nov 27).  Cause: `x1.sum()` is an output
of the same compiled autograd.Function as the returned value (before the `.item()`
break); autograd handed its backward zeros for the unused output and got x1's (zero)
gradient back.  Fixed: Note [Unused gradients] in spec/autograd.md (grads not
materialized; an input's gradient is None unless it reads a given output gradient)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-none"
SOURCE = '''
def f(x0, x1):
    v1 = x0[torch.tensor([0, -1])]
    s3 = x1.sum().item()
    v4 = torch.abs(x0)
    return v1,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1,), 'float32', 'contiguous', 0), ((), 'float32', 'contiguous', 0)],
    [((3,), 'float32', 'contiguous', 1), ((), 'float64', 'contiguous', 1)],
]
