"""`torch.ops.aten.native_dropout_backward.default(x0, mask, 2.0)` of a transposed input:
eager's CPU kernel (TensorIterator) follows the operands' memory order (strides (1, 4) for
shape (4, 3)); every backend returned row-major (3, 1).  Values were equal.  Cause: an
opaque call of an `OpOverload` took the overload's name (`default`) for the op's, so the
rules keyed by the op's name (eager_layout.pointwise_kernel here; also the deny list,
FACTORIES, SHAPE_ONLY, CHANNELS_LAST) missed it and the meta kernel's row-major strides
stood.  Found by `python -m tests.opinfo.runner --layout transposed`
(native_dropout_backward, called as an overload; Nov 27, main 37e1917).  Fixed: the
opaque call of an OpOverload takes its packet's name (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = torch.ops.aten.native_dropout_backward.default(x0, x0 > 0, 2.0)
    v2 = torch.ops.aten.copysign.Tensor(x0, x0 - 1)
    return v1, v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 3), 'float32', 'transposed', 0)],
]
