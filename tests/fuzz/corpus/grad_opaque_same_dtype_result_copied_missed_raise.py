"""A missed raise in backward (interp, eager, llvm): `mn, mx = torch.aminmax(x0, dim=1)`,
then `mn.add_(1)` after a break, the loss of `mx * 2`.  Eager's AminmaxBackward saved its
results, so its backward raises "one of the variables needed for gradient computation
has been modified by an inplace operation"; refcomp returns a gradient.  aminmax is an
opaque ATen call and the runtime hands its float results back as clones (Note [Fresh
outputs]: refcomp/aliasing.py lets an opaque result of an operand's dtype share that
operand's memory), so the in-place op never reaches the tensor autograd saved.  The
int64-indices case (cummax) is fixed: corpus grad_opaque_saved_result_copied_missed_raise.
Reported by the gradient helper (the thorough gradient test's aminmax / std_mean cases,
Nov 27).  Fixed: the runner of an `aten` node copies every result that is an operand or a
view of one (the traced `views`, and a cheap check on each call: codegen/opaque.py), so
its results never share operand memory and refcomp/aliasing.py treats them as fresh for
copies (strides still follow ATen's: `outputs_maybe_views`) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0):
    mn, mx = torch.aminmax(x0, dim=1)
    print(end='')
    mn.add_(1)
    return mx * 2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'float32', 'contiguous', 5)],
]
