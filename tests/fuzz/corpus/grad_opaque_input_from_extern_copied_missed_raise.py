"""A missed raise in backward (interp, eager, llvm; gradient mode): `v4 = F.avg_pool2d(...)`
of an input requiring grad, `torch.logsumexp(v4, -4)` (an opaque ATen call, whose node
saves v4), then `v4.masked_fill_(...)` (a break).  Eager's backward raises "one of the
variables needed for gradient computation has been modified by an inplace operation";
refcomp's aliasing analysis counted the pooling result as maybe sharing its input's
memory, so the caller got a fresh copy of v4 and its in-place change never reached the
tensor logsumexp's node saved.  Found by the session-11 gradient soak (seed 2112, program
14,843, main a252a66).  Fixed in session 12: extern results are fresh in the aliasing
analysis (refcomp/aliasing.py, `_may_alias_operands`), and a compiled Function hands a
view of its own buffer back detached (Note [Views of the Function's buffers],
refcomp/autograd.py), which the first try at this fix (dd22b79, reverted) lacked
(corpus grad_linear_output_modified_in_place_llvm) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    v4 = F.avg_pool2d(x0.reshape(-1, 1, *x0.shape[-2:]), 2)
    v8 = torch.logsumexp(v4, -4)
    v4.masked_fill_(v4 < 0, -1.5)
    return v8, v4,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'float32', 'expanded', 286, 'shifted')],
    [((5, 5), 'float32', 'contiguous', 288)],
]
