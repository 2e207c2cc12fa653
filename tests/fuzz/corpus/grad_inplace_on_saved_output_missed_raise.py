"""A missed raise in backward (interp, eager): `v5 = F.log_softmax(x0, dim=-2)` then
`v5.sigmoid_()`, v5 returned.  Eager's LogSoftmaxBackward saved its result v5, so the
in-place op bumps v5's version and eager's backward raises "one of the variables needed
for gradient computation has been modified by an inplace operation"; refcomp compiles
the graph functionally (the joint graph differentiates the value before the in-place
op) and returns a gradient, mathematically the right one.  Found by the gradient soak
(`--grad --seed 4`, Nov 27; 3 programs of 1,695 on interp and eager).  Every backend
breaks at `sigmoid_` (RB010) and eager runs it on the compiled graph's output; llvm
raises eager's error here only because its partition happens to save that output for
the backward (interp's and the eager backend's saved tensors differ).  Open:
eager's error depends on which tensors each ATen backward formula saves (results for
log_softmax, exp, tanh, sigmoid...; inputs for mul...), and refcomp's joint graph has no
such notion; matching it needs a per-op table of eager's saved results and a trace-time
check of in-place ops on them (refcomp/tracer).  The gradient mode relaxes this one
message while this file is open (GRAD_KNOWN_OPEN in tests/fuzz/grad.py)."""
STATUS = "open"
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
