"""Issue 11's "index dtypes" crash ("tensors used as indices must be long..."): int32 index
tensors in advanced indexing and index_select.  Passed on every backend when the fuzzer
landed; kept as a regression program."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: tensors used as indices must be long, int, byte or bool tensors"
SOURCE = '''
def f(x0, x1):
    i = x1.abs() % 3
    return x0[i], x0.index_select(1, i), x0[:, torch.tensor([0, 2], dtype=torch.int32)]
'''
INPUTS = [
    [((3, 3), 'float32', 'contiguous', 0), ((2,), 'int32', 'contiguous', 0)],
    [((4, 3), 'float32', 'step', 1), ((5,), 'int32', 'contiguous', 1)],
]
