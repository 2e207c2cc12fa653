"""An empty result (shape (3, 0, 1, 4)) of lerp: strides (4, 4, 4, 1) (row-major, every
backend) where eager's are (0, 4, 0, 1).  No element exists, so no value differs; eager's strides of
an empty TensorIterator result depend on its operands.  Open (found x8 by the 15-min soak
of Nov 24, /work/soak-11b.txt, on eager; interp and llvm, whose empty results are
row-major, show it too).  Closed, not as a code fix: eager leaves the strides of a tensor
with no element undefined (its CPU kernels and its meta kernels disagree; no view or value
depends on them), so the runner does not compare them (spec/testing.md, "What is
compared").  The program still replays values, shapes and aliasing."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride: call 1: out[0]: strides (4, 4, 4, 1), eager (0, 4, 0, 1) (shape (3, 0, 1, 4))"
SOURCE = '''
def f(x0, x1):
    x0 += x0
    v1 = torch.maximum(x1, x0)
    v3 = torch.lerp(x1, v1, 0.25)
    print(end='')
    v4 = x0 + 1
    return v3,
'''
INPUTS = [
    [((1, 4, 1, 4), 'float32', 'contiguous', 90), ((), 'float32', 'contiguous', 3)],
    [((3, 0, 1, 4), 'float32', 'contiguous', 91), ((), 'float32', 'contiguous', 4)],
    [((5, 4, 4, 5), 'float32', 'contiguous', 92), ((), 'float32', 'contiguous', 5)],
]
