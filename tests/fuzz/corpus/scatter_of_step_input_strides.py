"""`torch.slice_scatter`, `torch.select_scatter` and `torch.diagonal_scatter` of a
step-sliced (not dense) input: ATen copies the input with `clone_preserve_strides`, so
eager's result keeps the input's strides, (6, 2) for shape (4, 3); refcomp returned it
row-major, (3, 1), on every backend (values equal).  The meta kernels say (6, 2); Note
[Output layout] (refcomp/runtime.py) restrided only to dense strides.  Found by `python
-m tests.opinfo.runner --layout step` once the oracle's copies of a sample kept its
layout (they were `clone()`s: row-major, so the `step` and `offset` layouts never reached
the call; Nov 27).  Fixed: with static shapes Note [Output layout] restrides an output
to eager's strides when they are non-overlapping, dense or not (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = torch.slice_scatter(x0, torch.zeros(2, 3), 0, 0, 2)
    v2 = torch.select_scatter(x0, torch.zeros(3), 0, 1)
    v3 = torch.diagonal_scatter(x0, torch.zeros(3))
    return v1, v2, v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 3), 'float32', 'step', 0)],
]
