"""Issue 11's "in-place through views across breaks": views of an intermediate and of an
input mutated after print / .item() / float() breaks.  Passed on every backend when the
fuzzer landed; kept as a regression program."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value / input: wrong values and wrong inputs after the call"
SOURCE = '''
def f(x0, x1):
    v = x0 * 1
    w = v.t()
    print(end='')
    w[0].add_(1)
    u = x1[1:]
    u.mul_(2)
    s = x1.sum().item()
    u.add_(s)
    x1.transpose(0, 1)[0].add_(1)
    x1.view(-1).mul_(float(v.sum()))
    v.diagonal().fill_(s)
    return v, w, u
'''
INPUTS = [
    [((3, 3), 'float32', 'contiguous', 0), ((3, 3), 'float64', 'contiguous', 1)],
    [((3, 3), 'float32', 'transposed', 1), ((4, 4), 'float64', 'contiguous', 2)],
]
