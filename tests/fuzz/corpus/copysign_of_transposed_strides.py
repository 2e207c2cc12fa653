"""`torch.copysign(x1, x0)` with x1 transposed and x0 row-major: eager's result follows
x1's memory order, strides (1, 2) for shape (2, 4) (TensorIterator); every backend returns
it row-major, (4, 1).  Values are equal.  Found by the thorough profile's 20,000-program
run (Nov 27, main 19bab92, program 8788).  Cause: copysign is an opaque `aten` node
typed by torch's meta kernel, which says (4, 1) where the CPU kernel gives (1, 2); refcomp
takes the meta kernel's strides.  A fix: the TensorIterator rule (the operands' memory
order) for opaque ops tagged `pointwise`, except those whose CPU kernel clones Contiguous
(masked_fill).
Fixed: opaque calls of ATen pointwise kernels take TensorIterator's layout
(refcomp/tracer/eager_layout.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0, x1):
    x0[0] = -1
    v1 = torch.copysign(x1, x0)
    return v1,
'''
INPUTS = [
    [((2, 4), 'float32', 'contiguous', 1), ((2, 4), 'float32', 'transposed', 432)],
]
