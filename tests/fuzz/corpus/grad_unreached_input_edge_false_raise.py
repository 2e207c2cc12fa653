"""A false raise in backward (interp, llvm; gradient mode): `v1 = F.softmax(x0 * 2, -1)`
and an opaque `F.elu` in one graph (so it runs on the eager backend: v1's grad_fn is a
torch Softmax node, which saves its result), `v1.tanh_()`, then a graph that reads v1 only
for a dead `torch.sigmoid(v1)` and returns `F.softmax(x0 * 2, -1)`.  Eager's returned
softmax does not depend on v1, so its backward never reaches v1's Softmax node; refcomp's
backward raised "one of the variables needed for gradient computation has been modified
by an inplace operation ... output 0 of Softmax".  Cause (not cse, as first guessed): the
second graph's CompiledFunction had v1 as an input, hence an autograd edge to it, and
autograd runs that node (which unpacks and version-checks its saved result) even though
the Function's backward returns None for v1.  Found by the thorough gradient loop (Nov 27,
main d8aba26, program 584).  Fixed: an input no output depends on is handed to the
Function detached, so it has no edge (Note [Inputs no gradient reaches],
spec/autograd.md; issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v1 = F.softmax(x0 * 2, dim=-1)
    v2 = F.elu(x0)
    v1.tanh_()
    v3 = torch.cat([p.sum(0, keepdim=True) for p in x0.unbind(0)])
    v6 = F.softmax(x0 * 2, dim=-1)
    v7 = torch.sigmoid(v1)
    v8 = F.pixel_shuffle(v7.repeat(1, 4, 1, 1), 2)
    return [v6]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 2, 3, 1), 'float64', 'contiguous', 29, 'shifted')],
    [((4, 3, 3, 1), 'float64', 'contiguous', 30, 'shifted')],
]
