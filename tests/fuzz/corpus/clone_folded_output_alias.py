"""A `clone` whose copy is only mutated is folded away: the output is the original tensor,
and the in-place op on the clone lands in it (issue 11's first example)."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["eager", "llvm"]
SYMPTOM = "value: out[0] and out[1] differ (the narrow(...).mul_ on the clone hit v0)"
SOURCE = '''
def f(x0, x1):
    v0 = torch.take_along_dim(x1, x1.argmax(dim=0, keepdim=True), dim=0)
    v2 = v0.clone()
    v2.narrow(0, 0, 1).mul_(0.5)
    return torch.where(v0 > x1, v0, 0.0), v0
'''
INPUTS = [
    [((3, 4), 'float32', 'contiguous', 0), ((3, 4), 'float32', 'contiguous', 1)],
]
