"""`F.conv2d` and `F.conv_transpose2d` of an input without a batch dim (C, H, W) and a
channels_last weight: eager's CPU kernels unsqueeze the input to a batch of one and
return the channels_last result squeezed back (conv2d: strides (1, 24, 4) for shape
(4, 4, 6)); every backend returned row-major (24, 6, 1).  Values were equal.  refcomp
laid a result out channels_last only when it was 4-d.  Found by `python -m
tests.opinfo.runner --layout channels_last --samples 3` (nn.functional.conv2d#1,
nn.functional.conv_transpose2d#1; Nov 27, main ce2a754).  Fixed:
refcomp/tracer/eager_layout.py's conv_strides, for the conv2d entry and the opaque
convolutions alike (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    w = torch.linspace(-1, 1, 36).reshape(4, 3, 3, 1).contiguous(
        memory_format=torch.channels_last)
    v1 = F.conv2d(x0, w, padding=(1, 0))
    v2 = F.conv_transpose2d(x0, w.transpose(0, 1).contiguous(memory_format=torch.channels_last))
    return v1, v2 * 2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((3, 4, 6), 'float32', 'contiguous', 0)],
]
