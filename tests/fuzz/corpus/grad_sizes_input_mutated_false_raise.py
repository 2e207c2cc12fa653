"""A false raise in backward (interp, llvm; gradient mode): `x1 *= 2` on an input that
does not require grad, beside `x0.sum()`, at a second call's new sizes (dynamic).  The
backward of the sum needs x0's size, a symbol it shares with x1, and the partition bound
it by passing x1 to the backward (Note [Recomputed sizes]) through save_for_backward, so
the write-back of x1 made autograd's version check raise "one of the variables needed for
gradient computation has been modified by an inplace operation"; eager's sum saves no
tensor.  Found by the session-11 gradient soak (seed 2111, program 11,035, on f2fa174).
Fixed: an input the backward reads for its sizes only is handed over without a version
check (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0, x1):
    x1 *= 2
    v1 = x0.sum()
    return v1,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 1), 'float32', 'transposed', 673), ((3, 1), 'bfloat16', 'contiguous', 9)],
    [((4, 1), 'float32', 'transposed', 674), ((4, 1), 'bfloat16', 'contiguous', 10)],
]
