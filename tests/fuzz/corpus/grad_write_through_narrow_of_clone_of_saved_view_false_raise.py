"""A false raise (interp, eager, llvm; gradient mode): `v2 = v1.transpose(-2, -4)` of a
(1, 4, 1, 1) intermediate, `torch.minimum(v2, v2)` (which saves v2), then
`w5 = v2.clone(memory_format=torch.contiguous_format)` and `w5.narrow(0, 0, 1).add_(3)`.
Eager's clone is a tensor of its own, so the write changes nothing minimum saved and its
backward runs; refcomp's backward raises "one of the variables needed for gradient
computation has been modified by an inplace operation: [torch.DoubleTensor [1, 4, 1, 1]],
is at version 1" (the refcomp check of a tensor eager saves or the compiled backward
reads).  Pre-existing (the base of session 17, f13da82, raises too); found by the
session-17 gradient soak (seed 1751, program 907, on c38ed27).  Fixed: an output a folded
clone made (TraceContext.copy_aliases) has a version counter of its own, so the version
check leaves it out (`_unsure_outputs` in refcomp/runtime.py); the gradient soak's seed
1791 hit the same class (`w8 = x0.reshape(-1).clone(); w8[None] *= 3` beside a conv2d)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v1 = x0 ** 2 + x0
    v2 = v1.transpose(-2, -4)
    v3 = torch.minimum(v2, v2)
    v4 = v3.select(-2, 0)
    w5 = v2.clone(memory_format=torch.contiguous_format)
    w5.narrow(0, 0, 1).add_(3)  # must capture
    return [x0, v3]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 4, 1, 1), 'float64', 'contiguous', 274)],
]
