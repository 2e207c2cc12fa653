"""`Tensor.roll` and `F.group_norm` of a channels_last input: eager's CPU kernels return
channels_last (roll: empty_like with preserve_format; group_norm: the input's suggested
memory format), every backend returns row-major: both run as opaque `aten` nodes whose
result type comes from torch's meta kernels, which say row-major (eager's own meta kernels
disagree with its CPU kernels here).  Found by fuzzfix probing channels_last inputs, Nov 27
(main 43a9379).  Fixed: the opaque path gives their results' meta eager's layout
(CHANNELS_LAST in refcomp/tracer/opaque.py; roll only when every shift moves its dim,
since ATen returns a row-major clone for a shift that is a multiple of the size)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    return x0.roll(1, 2), F.group_norm(x0, 1)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4, 6), 'float32', 'channels_last', 0)],
]
