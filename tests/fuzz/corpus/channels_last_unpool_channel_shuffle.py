"""`F.max_unpool2d` and `F.channel_shuffle` of a channels_last input: eager's CPU kernels
return channels_last (max_unpool2d: strides (192, 1, 24, 4) for shape (2, 4, 8, 6));
every backend returned row-major.  Both run as opaque `aten` nodes whose meta kernels say
row-major; ATen allocates their results in the input's suggested memory format.  Found by
`python -m tests.opinfo.runner --layout channels_last` (nn.functional.max_unpool2d,
nn.functional.channel_shuffle; Nov 27, main ce2a754).  Fixed: CHANNELS_LAST in
refcomp/tracer/opaque.py lists them (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1, v2 = F.max_pool2d(x0, 2, return_indices=True)
    return F.max_unpool2d(v1, v2, 2), F.channel_shuffle(x0, 2)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 4, 8, 6), 'float32', 'channels_last', 0)],
]
