"""A missed raise in backward (interp, eager, llvm; gradient mode): `torch.minimum(x0, x1)`
of a bool x0 and a float x1 that requires grad, then `x0.copy_(x1)` (a break).  Eager's
MinimumBackward saves x0 itself and its backward raises "one of the variables needed for
gradient computation has been modified by an inplace operation"; refcomp's IR reads x0
through the promotion cast `cast x0 {dtype=f32}`, so the saved-tensor checks (Note [Saved
by eager]) saw the cast's result saved, not x0, and a gradient came back.  Found by the
session-11 gradient soak (seed 2112, program 28, main a252a66).  Fixed: the tracer records
its promotion casts (`EagerSaves.casts`, ir/autodiff.py) and a saved cast result counts as
its operand (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0, x1):
    v2 = torch.minimum(x0, x1)
    x0.copy_(x1)
    v3 = x1 * 2
    return v2, v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'bool', 'permuted', 181), ((), 'float32', 'contiguous', 580)],
    [((2, 4), 'bool', 'contiguous', 182), ((), 'float64', 'contiguous', 581)],
]
