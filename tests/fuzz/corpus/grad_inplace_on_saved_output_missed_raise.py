"""A missed raise in backward (interp, eager): `v5 = F.log_softmax(x0, dim=-2)` then
`v5.sigmoid_()`, v5 returned.  Eager's LogSoftmaxBackward saved its result v5, so the
in-place op bumps v5's version and eager's backward raises "one of the variables needed
for gradient computation has been modified by an inplace operation"; refcomp compiles
the graph functionally (the joint graph differentiates the value before the in-place
op) and returned a gradient, mathematically the right one.  Found by the gradient soak
(`--grad --seed 4`, Nov 27; 3 programs of 1,695 on interp and eager).  Every backend
breaks at `sigmoid_` (RB010) and eager runs it on the compiled graph's output; llvm
raised eager's error here only because its partition happened to save that output.
Fixed (Note [Saved by eager], ir/ops/registry.py): each OpDef records which operands or
result eager's backward saves (`saves=`, from derivatives.yaml); per output that requires
grad, the graph inputs and outputs that eager's nodes on its path save (or that share
storage with them through views) get their versions taken after the call, and a pre-hook
on the output's grad_fn raises eager's error when the gradient arrives and one has
changed; an in-place op inside a graph on a tensor an earlier op saved breaks the graph
there."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    v5 = F.log_softmax(x0, dim=-2)
    v9 = torch.cat([v5, v5], dim=1)
    v5.sigmoid_()
    return v5,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 2), 'float32', 'contiguous', 700)],
]
