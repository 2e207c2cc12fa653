"""`F.conv3d` and `F.conv_transpose3d` of a channels_last_3d input: eager's CPU kernels
(mkldnn, picked for a batch of two) return channels_last_3d results (conv3d: strides
(256, 1, 64, 16, 4) for shape (2, 4, 4, 4, 4)); every backend returned row-major.  Both
run as opaque `aten` nodes whose meta kernels say row-major.  ATen's layout here depends
on the kernel it picks (slow3d, picked for other sizes or one thread, writes row-major),
so such a call runs at a break.  Found probing 3-d convolutions after the layout oracle's
conv findings (Nov 27, main 807cfeb).  Fixed: a 3-d convolution with a channels_last_3d
operand is RB013 (refcomp/tracer/opaque.py) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    x = (x0 * 2).contiguous(memory_format=torch.channels_last_3d)
    w = torch.linspace(-1, 1, 32).reshape(4, 2, 2, 2, 1)
    v1 = F.conv3d(x, w, padding=(1, 1, 0))
    v2 = F.conv_transpose3d(x, w.transpose(0, 1).contiguous())
    return v1, v2 + 1
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 2, 3, 3, 4), 'float32', 'contiguous', 0)],
]
