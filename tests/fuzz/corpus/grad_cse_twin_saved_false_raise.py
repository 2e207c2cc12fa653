"""A false raise in backward (interp, llvm; gradient mode): `v1 = F.softmax(x0 * 2, -1)`,
`v1.tanh_()` (with other statements around), then `v6 = F.softmax(x0 * 2, -1)` returned.
Eager's second softmax is a node of its own that saves its own result, so nothing
raises; refcomp's backward raises "one of the variables needed for gradient computation
has been modified by an inplace operation" naming the output of Softmax.  The likely
cause, not confirmed: `cse` makes the two softmaxes one value, so the tensor saved for
v6's backward is the one changed through v1.  The four-line form of the program does not
fail.  Found by the thorough gradient loop (Nov 27, main d8aba26, program 584); open
(issue 11)."""
STATUS = "open"
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
