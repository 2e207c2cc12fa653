"""`F.conv2d` and `F.batch_norm` of a channels_last input: eager's CPU kernels return
channels_last results (conv2d: strides (96, 1, 24, 4) for shape (2, 4, 4, 6)); every
backend returned row-major.  conv2d's meta kernel itself says row-major, and batch_norm
is typed from the IR (`ir_meta`), row-major, so Note [Output layout] had nothing to
restride to.  Found by fuzzfix probing channels_last inputs, Nov 27 (main 43a9379).
Fixed: their entries are flagged `channels_last` (refcomp/tracer/torch_table.py): the
result's meta is channels_last when a 4-d operand suggests that format, as ATen's CPU
kernels decide."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = F.conv2d(x0, torch.linspace(-1, 1, 12).reshape(4, 3, 1, 1), padding=1)
    v2 = F.batch_norm(x0, torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3))
    return v1, v2 * 2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4, 6), 'float32', 'channels_last', 0)],
    [((3, 3, 5, 6), 'float32', 'channels_last', 1)],
]
