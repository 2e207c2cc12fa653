"""`Tensor.roll`, `F.group_norm` and `F.channel_shuffle` of a channels_last_3d input:
eager's CPU kernels return channels_last_3d results (group_norm: strides
(48, 1, 16, 4, 2) for shape (2, 2, 3, 4, 2)); every backend returned row-major.  The
rule that gave them a channels_last layout for 4-d inputs (CHANNELS_LAST in
refcomp/tracer/opaque.py) covered 4-d results only.  Found probing 3-d CNN ops on
channels_last_3d inputs (Nov 27, main 8a5518a).  Fixed: the rule covers 5-d results and
channels_last_3d (torch_table.as_channels_last) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    x = (x0 + 1).contiguous(memory_format=torch.channels_last_3d)
    return x.roll(1, 2), F.group_norm(x, 1), F.channel_shuffle(x, 2)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 2, 3, 4, 2), 'float32', 'contiguous', 0)],
]
