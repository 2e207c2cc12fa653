"""A false raise (interp, eager, llvm; gradient mode): `w2 = v1.clone()`, `v3 = w2 * w2`
(MulBackward saves the clone w2, not v1), a graph break, then `v1.add_(1)`.  Eager's
backward runs (nothing saved v1); refcomp's raised "one of the variables needed for
gradient computation has been modified by an inplace operation", because the tracer
folded the clone into v1's value, so the value mul saves was v1's and v1's output was
version-checked.  Pre-existing, the converse of
grad_clone_saved_by_mul_modified_at_break_missed_raise (issue 33).  Fixed: a clone
under grad is a `copy` node of its own (Note [Clones under grad], spec/autograd.md)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v1 = x0 * 2
    w2 = v1.clone()
    v3 = w2 * w2
    s4 = v3.sum().item()
    v1.add_(1)
    return v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 3), 'float64', 'contiguous', 12)],
]
