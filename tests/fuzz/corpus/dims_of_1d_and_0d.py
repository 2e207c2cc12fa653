"""Issue 11's "Dimension out of range" on 1-d inputs: dim -1 / 0 and t() on 1-d and 0-d
tensors.  Passed on every backend when the fuzzer landed; kept as a regression program."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: IndexError: Dimension out of range"
SOURCE = '''
def f(x0, x1):
    a = x0.t() + x0.sum(-1) + x0.softmax(-1) + x0.cumsum(0)
    b = x1.sum(0) + x1.amax(-1) + x1.unsqueeze(-1).squeeze(0) + x1.flatten()
    return a, b, x0.transpose(0, -1), x1.argmax(0, keepdim=True)
'''
INPUTS = [
    [((3,), 'float32', 'contiguous', 0), ((), 'float32', 'contiguous', 1)],
    [((1,), 'float32', 'offset', 1), ((), 'float32', 'contiguous', 2)],
]
