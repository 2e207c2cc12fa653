"""A pointwise op on a permuted input keeps the input's memory order in eager
(TensorIterator); refcomp returns a contiguous tensor."""
STATUS = "open"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "stride: strides (6, 3, 1), eager (1, 2, 6) for a permuted input"
SOURCE = '''
def f(x0):
    return x0 > 0.5
'''
INPUTS = [
    [((3, 2, 3), 'float32', 'permuted', 0)],
]
