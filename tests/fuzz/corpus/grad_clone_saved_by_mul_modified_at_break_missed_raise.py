"""A missed raise (interp, eager, llvm; gradient mode): `w1 = x0.clone()`, `v2 = w1 * w1`
(MulBackward saves the clone w1), a graph break, then `w1.add_(1)`.  Eager's backward
raises "one of the variables needed for gradient computation has been modified by an
inplace operation" (the clone is at version 1); refcomp's ran, because the tracer folded
the clone into x0's value, so the compiled backward saved x0 and the version checks
could not tell the clone from x0.  Pre-existing (the session-17 closing note's missed
raise, issue 33).  Fixed: a clone under grad is a `copy` node of its own (Note [Clones
under grad], spec/autograd.md), so the value mul saves is the clone's and the output
that is the clone is version-checked."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    w1 = x0.clone()
    v2 = w1 * w1
    s3 = v2.sum().item()
    w1.add_(1)
    return v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 3), 'float64', 'contiguous', 11)],
]
