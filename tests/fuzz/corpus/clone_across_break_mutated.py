"""A clone passed through a graph break aliases the cloned tensor: a later in-place op on the
original changes the clone."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["eager", "llvm"]
SYMPTOM = "value: the clone sees the later relu_ of its source"
SOURCE = '''
def f(x0):
    v1 = x0 * 2
    v2 = OPAQUE(v1.clone())
    v1.relu_()
    return v2
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
