"""`F.conv1d` and `F.conv_transpose1d` with a transposed weight (strides (K * C, 1, C)):
eager's CPU kernels return a "channels-last 1-d" result (conv1d: strides (18, 1, 3) for
shape (2, 3, 6)); every backend returned row-major (18, 6, 1).  Values were equal.  Both
run as opaque `aten` nodes whose meta kernel says row-major; ATen's `_convolution` runs a
1-d convolution as a 2-d one on the unsqueezed input (made contiguous first) and weight,
channels_last when either suggests it.  Found by `python -m tests.opinfo.runner --layout
transposed` (nn.functional.conv1d, nn.functional.conv_transpose1d; Nov 27, main
37e1917).  Fixed: refcomp/tracer/eager_layout.py's conv_strides ports the rule for the
opaque conv1d / conv_transpose1d calls (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    w = torch.linspace(-1, 1, 18).reshape(3, 2, 3).transpose(1, 2)
    v1 = F.conv1d(x0, w, padding=1)
    v2 = F.conv_transpose1d(x0, w.transpose(0, 1).contiguous().transpose(1, 2))
    return v1, v2 + 1
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 5), 'float32', 'transposed', 0)],
]
