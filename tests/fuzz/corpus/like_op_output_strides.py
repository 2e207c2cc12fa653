"""`torch.ones_like` of a permuted input: eager's preserve_format keeps the input's memory
order (strides (1, 2, 8, 24)); refcomp's `full` wrote a row-major tensor on every backend
(soak find on the eager backend, where fresh-output strides are compared).  Fixed: outputs
whose eager strides are dense but not row-major are restrided when the backend's differ
(refcomp/runtime.py, Note [Output layout])."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride: out[0]: strides (12, 3, 1, 1), eager (1, 2, 8, 24) (shape (2, 4, 3, 1))"
SOURCE = '''
def f(x0):
    v2 = torch.ones_like(x0)
    v3 = torch.abs(x0)
    return v2, x0
'''
INPUTS = [
    [((2, 4, 3, 1), 'float32', 'permuted', 0)],
]
