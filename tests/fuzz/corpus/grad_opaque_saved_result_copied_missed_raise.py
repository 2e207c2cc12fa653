"""A missed raise in backward (interp, eager, llvm): `v1, v2 = x0.cummax(2)` then
`v2[0] = 3` (the indices, which do not require grad), the loss of `v1.floor()`.  Eager's
CummaxBackward saved the indices, so its backward raises "one of the variables needed for
gradient computation has been modified by an inplace operation"; refcomp returns a
gradient.  The in-place op breaks the graph (RB010: an earlier op saved the tensor, Note
[Saved by eager]) and runs in eager on the graph's output, but that output is a copy:
cummax is an opaque ATen call (no VJP, so the graph runs on the eager backend, whose
autograd records the call and saves its own indices tensor), and the runtime hands both
results back as fresh clones (Note [Fresh outputs], refcomp/aliasing.py: an opaque
result may share memory with its operand), so the change never reaches the saved tensor.
Found by the gradient soak (`--grad --seed 6`, Nov 27, 1 program of ~1,000 per backend)
once GRAD_KNOWN_OPEN no longer relaxed the message on interp and eager (llvm never was).
Fixed for results of another dtype than every operand (cummax's int64 indices): a view
has its base's dtype, so refcomp/aliasing.py no longer copies them (it took the union of
the node's result dtypes).  Same-dtype results of an opaque call (aminmax's, std_mean's)
were still copied then: corpus grad_opaque_same_dtype_result_copied_missed_raise, since
fixed (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    v1, v2 = x0.cummax(2)
    v2[0] = 3
    v4 = v1.floor()
    return v4
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 4, 1), 'float32', 'contiguous', 727)],
]
