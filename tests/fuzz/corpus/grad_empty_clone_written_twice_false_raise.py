"""A false raise (interp, eager, llvm; gradient mode): on the second call, whose input has
a 0-size dim (channels_last [1, 2, 0, 4]), writes into clones (`w9[1:] *= 2`, `w9.exp_()`,
`w11[..., ::2] += 1`) make refcomp's backward raise "modified by an inplace operation:
[torch.DoubleTensor [1, 2, 0, 4]], is at version 2" where eager's backward runs.  Found by
the session-17 gradient soak (seed 1797, program 6,284, on 6866802).  The 0-size dim is
incidental: the second call's sizes are symbolic, `w9[1:] *= 2` breaks there (RB018), and
the resumed graph starts at `w9.exp_()` on an input.  There the tracer folded
`w11 = w9.clone()` into exp's result, so (a) it took w11 for a tensor exp saves and broke
again at `w11[..., ::2] += 1` (RB010), and (b) the graph returned exp's result as w9's new
value (copied into w9) and as w11 itself, the very tensor the compiled backward saved: the
eager `+=` after the break changed it.  A non-empty input with the same break raises too.
Fixed (issue 33, session 18): a clone under grad is a `copy` node of its own (Note [Clones
under grad], spec/autograd.md); the write into w11 is captured and w11 is no saved tensor."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v1 = x0.var(dim=-4, correction=2)
    v5 = torch.sub(x0, x0, alpha=3)
    v8 = v1.max(2)[0]
    w9 = v5.clone(memory_format=torch.contiguous_format)
    w9[1:] *= 2  # must capture
    w9.exp_()
    w11 = w9.clone(memory_format=torch.contiguous_format)
    w11[..., ::2] += 1  # must capture
    w12 = v8.clone(memory_format=torch.contiguous_format)
    w12[0] = 3  # must capture
    v13 = torch.roll(v1, shifts=-1)
    return v8, v8, w11,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 4, 1, 4), 'float64', 'channels_last', 999)],
    [((1, 2, 0, 4), 'float64', 'channels_last', 1000)],
]
