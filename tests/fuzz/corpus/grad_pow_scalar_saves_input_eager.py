"""A raise in backward where eager computes a gradient (eager backend): `v1 = x0 ** 2`,
then `v1.T.neg_()` and `v1[v1 > 0] = 2` modify v1 in place.  Eager's `x0 ** 2` is
pow.Tensor_Scalar, whose backward (PowBackward0) saves x0, not its result, so the
in-place ops on v1 are harmless; refcomp's eager backend ran the IR's `pow` with the
exponent as a 0-d tensor, pow.Tensor_Tensor, whose backward (PowBackward1) saves its
result, and the backward raised "one of the variables needed for gradient computation has
been modified by an inplace operation ... output 0 of Pow1".  Found by the thorough
gradient profile (Nov 27, main 234819e; 3 programs of 1,000 on eager).  Fixed: the eager
backend runs a pow by a constant 0-d exponent with a Python number, as eager does (Note
[Eager's autograd formula] in codegen/eager.py) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: one of the variables needed for gradient computation has been modified by an"
SOURCE = '''
def f(x0):
    v1 = x0 ** 2
    v5 = v1.T if v1.dim() == 2 else v1
    v5.neg_()
    v1[v1 > 0] = 2
    return v1,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'float32', 'contiguous', 172)],
    [((3, 2), 'float32', 'contiguous', 173)],
]
