"""Advanced indexing (`x0[:, [0, -1]]`) of a permuted input, after recompiles with dynamic
sizes: eager's result is row-major, strides (8, 4, 1, 1) for shape (1, 2, 1, 4); every
backend returns (1, 1, 1, 2), the input's memory order.  Values are equal.  Found by the
thorough profile's per-backend hypothesis run (Nov 27, main 19bab92).  Cause:
torch's meta kernel and its CPU kernel disagree here, and refcomp takes the meta kernel's
strides: for that input (shape (1, 2, 1, 4), strides (1, 1, 2, 2)) the meta result has
(1, 1, 1, 2), the CPU result (8, 4, 1, 1); with no size-1 dims the two agree.  Same root
as copysign_of_transposed_strides.
Fixed: the tracer computes AdvancedIndex's TensorIterator layout, index tensors included
(refcomp/tracer/eager_layout.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0, x1):
    v1 = torch.lerp(x0, x0, 0.25)
    v5 = x0[:, [0, -1]]
    return v5,
'''
INPUTS = [
    [((1, 1, 1, 1), 'float32', 'permuted', 0), ((), 'float32', 'contiguous', 0)],
    [((1, 1, 1, 1), 'float32', 'permuted', 1), ((), 'float32', 'contiguous', 1)],
    [((1, 2, 1, 4), 'float32', 'permuted', 2), ((), 'float32', 'contiguous', 2)],
]
