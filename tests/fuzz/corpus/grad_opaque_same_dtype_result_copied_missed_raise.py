"""A missed raise in backward (interp, eager, llvm): `mn, mx = torch.aminmax(x0, dim=1)`,
then `mn.add_(1)` after a break, the loss of `mx * 2`.  Eager's AminmaxBackward saved its
results, so its backward raises "one of the variables needed for gradient computation
has been modified by an inplace operation"; refcomp returns a gradient.  aminmax is an
opaque ATen call and the runtime hands its float results back as clones (Note [Fresh
outputs]: refcomp/aliasing.py lets an opaque result of an operand's dtype share that
operand's memory), so the in-place op never reaches the tensor autograd saved.  The
int64-indices case (cummax) is fixed: corpus grad_opaque_saved_result_copied_missed_raise.
Reported by the gradient helper (the thorough gradient test's aminmax / std_mean cases,
Nov 27).  Open: the runner of an `aten` node copies any result that is a view of an
operand (codegen/opaque.py), so its results never share operand memory and aliasing.py
could treat them as fresh; but `outputs_maybe_views` also uses those roots to decide which
llvm outputs need eager's strides, which has to be separated first."""
STATUS = "open"
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
