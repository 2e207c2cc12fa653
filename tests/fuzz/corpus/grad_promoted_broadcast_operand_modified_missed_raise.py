"""A missed raise in backward (interp, eager, llvm; gradient mode): `x1 / x0` of a float16
x1 of shape (4, 2) broadcast against a float32 x0 of shape (4, 4, 2) that requires grad,
then `x1.neg_()`.  Eager's DivBackward saves x1 itself and raises "one of the variables
needed for gradient computation has been modified by an inplace operation"; refcomp's IR
reads x1 as `expand(cast x1)`, a view of the promotion cast, which the cast rule of
`EagerSaves` (grad_promoted_operand_modified_missed_raise) did not follow.  Found by the
session-11 gradient soak (seed 2112, program 9,619, main a252a66).  Fixed: a saved view
of a promotion cast counts as the cast's operand too (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0, x1):
    v5 = x1 / x0
    x1.neg_()
    print(end='')
    return v5,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 4, 2), 'float32', 'contiguous', 817), ((4, 2), 'float16', 'permuted', 969)],
    [((4, 4, 2), 'float32', 'contiguous', 818), ((4, 2), 'float16', 'permuted', 970)],
]
