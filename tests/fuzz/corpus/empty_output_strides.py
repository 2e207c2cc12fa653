"""A pointwise result with a size-0 dim: strides (1, 0, 0, 1) on llvm, (0, 0, 0, 0) on
interp, where eager's are row-major (4, 4, 1, 1): llvm allocated it as empty_like of an
expanded one-element prototype (codegen/runtime.py, `_prototype`), interp kept numpy's
strides of an empty array (codegen/torch_bridge.py, `from_numpy`).  Hidden while the
fresh-output stride check was relaxed (pointwise_output_strides); found when that was
fixed.  Fixed: both allocate a real row-major empty tensor."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "stride: call 2: out[0]: strides (1, 0, 0, 1) (llvm), (0, 0, 0, 0) (interp), eager (4, 4, 1, 1) (shape (1, 0, 4, 1))"
SOURCE = '''
def f(x0):
    v1 = torch.abs(x0)
    return v1,
'''
INPUTS = [
    [((1, 1, 4, 1), 'float32', 'contiguous', 0)],
    [((1, 1, 4, 1), 'float32', 'contiguous', 1)],
    [((1, 0, 4, 1), 'float32', 'contiguous', 2)],
]
