"""A crash (llvm): a program whose only output is an input, with a dead `F.linear(x0, w)`
of an input that requires grad, raised "RuntimeError: matmul(): functions with out=...
arguments don't support automatic differentiation, but one of the arguments requires
grad" in the forward.  Found by the gradient soak (`--grad --seed 2`, llvm, Nov 27).
Cause: no output requires grad, so the graph is compiled forward-only (no joint graph,
no autograd.Function around it) and run with grad mode on; llvm calls ATen's matmul with
`out=`.  Fixed: such a graph runs under no_grad on a backend autograd does not record
(refcomp/runtime.py, `_without_grad`)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["llvm"]
SYMPTOM = "crash: RuntimeError: matmul(): functions with out=... arguments don't support automatic different"
SOURCE = '''
def f(x0, x1):
    v1 = F.linear(x0, torch.linspace(-1, 1.25, 3 * x0.shape[-1], dtype=x0.dtype).reshape(3, -1))
    v3 = x0
    if x0.is_floating_point():
        v3 = v3.exp()
    v4 = torch.cat([p.sum(0, keepdim=True) for p in v1.unbind(0)])
    return x1
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 2, 1, 4), 'float32', 'contiguous', 62), ((4, 1), 'float32', 'contiguous', 467)],
    [((4, 1, 1, 1), 'float32', 'contiguous', 63), ((4, 1), 'float32', 'contiguous', 468)],
    [((1, 2, 1, 1), 'float32', 'contiguous', 64), ((4, 1), 'float32', 'contiguous', 469)],
]
