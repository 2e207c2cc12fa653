"""A result that lost its gradient (eager backend): `x0[torch.tensor([0, -1])]` of an input
with no element ((4, 3, 0), requiring grad).  The eager backend's index_select step made
an empty tensor with `new_empty` when the operand had no element (there is nothing to
gather, and ATen's getitem checks no index then), so the result did not require grad and
was not in the autograd graph; eager's requires grad (IndexBackward0) and the backward
gives x0 a zero gradient.  Found by the gradient soak (`--grad --seed 12`, Nov 27, main
022b28a; a grad-flag on eager after the first call recompiled for the empty shape).
Fixed: the step gathers with index 0 (in range: the dim is not empty) instead, which
reads nothing and records autograd (codegen/eager.py `_make_index_select`) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-flag"
SOURCE = '''
def f(x0):
    v2 = x0[torch.tensor([0, -1])]
    v4 = x0.new_zeros(2, 3)
    v5 = (v4 / 0).int()
    return v5, v2, v2,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 3, 4), 'float32', 'contiguous', 423)],
    [((4, 3, 0), 'float32', 'contiguous', 424)],
    [((1, 0, 4), 'float32', 'contiguous', 425)],
]
