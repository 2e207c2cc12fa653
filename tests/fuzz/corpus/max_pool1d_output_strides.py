"""`F.max_pool1d` of a transposed 3-d input, no grad: eager's CPU kernel returns a
row-major result (strides (8, 2, 1) for shape (2, 4, 2)); every backend returned the
input's order (8, 1, 4), the meta kernel's (a 2-d pooling of the unsqueezed input, which
ATen runs only when autograd records the call).  Values were equal.  Found probing 1-d
CNN ops on transposed inputs after the layout oracle (Nov 27, main 8a5518a).  Fixed:
eager_layout.ROW_MAJOR_WITHOUT_GRAD (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    return F.max_pool1d(x0, 2), F.max_pool1d(x0 * 2, 1)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 4, 4), 'float32', 'transposed', 0)],
]
