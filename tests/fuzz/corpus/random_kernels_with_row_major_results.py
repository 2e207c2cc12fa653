"""`torch.poisson`, `torch.rrelu(training=True)` and `torch.normal(mean, std_tensor)` of a
transposed or channels_last input: ATen's CPU kernels allocate their results row-major;
torch's meta kernels keep the input's layout, and every backend returned that layout.
Found by probing random ops on non-row-major inputs after the OpInfo layout run (Nov 27,
session 9).  Fixed: `ROW_MAJOR_RESULTS` in refcomp/tracer/eager_layout.py, each entry
checked against the CPU kernel by tests/frontend/test_eager_layout.py."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = torch.poisson(x0.abs())
    v2 = torch.rrelu(x0, training=True)
    v3 = torch.normal(x0, x0.abs())
    return v1, v2, v3
'''
INPUTS = [
    [((5, 6), 'float32', 'transposed', 0)],
    [((2, 3, 4, 5), 'float32', 'channels_last', 1)],
]
