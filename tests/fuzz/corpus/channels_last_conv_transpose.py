"""`F.conv_transpose2d` of a channels_last input: eager's CPU kernel returns a channels_last
result (strides (70, 1, 14, 2) for shape (2, 2, 5, 7)); every backend returned row-major.
It runs as an opaque `aten` node whose meta kernel says row-major.  Found by fuzzfix
probing channels_last inputs, Nov 27 (main fc4d7fc).  Fixed: CHANNELS_LAST in
refcomp/tracer/opaque.py gives its result's meta eager's layout when the input or the
weight is channels_last, as for conv2d."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    return F.conv_transpose2d(x0, torch.linspace(-1, 1, 24).reshape(3, 2, 2, 2))
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4, 6), 'float32', 'channels_last', 0)],
    [((3, 3, 6, 8), 'float32', 'channels_last', 1)],
]
