"""`x.contiguous(memory_format=torch.channels_last)` of a row-major 4-d input is a new
channels_last tensor in eager; every backend returned the input itself (row-major), so
the in-place op after it wrote the caller's tensor.  Found while writing the random-draw
layout tests (Nov 27, session 9); the fuzzer had no memory-format template, now it has.
Cause: the `contiguous` entry asked `is_contiguous()` instead of
`is_contiguous(memory_format=...)`.  Fixed: refcomp/tracer/tensor_layout.py `_contiguous`."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "input"
SOURCE = '''
def f(x0):
    v1 = x0.contiguous(memory_format=torch.channels_last)
    v1.add_(1)
    return v1,
'''
INPUTS = [
    [((1, 2, 3, 4), 'float32', 'contiguous', 0)],
]
