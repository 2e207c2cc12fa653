"""A returned `x.detach()` (next to a dead op): interp returns a copy, llvm the input object
itself; eager returns a new tensor sharing x's storage."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "alias: out[0] shares no storage with x0 (interp) / is x0 (llvm)"
SOURCE = '''
def f(x0):
    v1 = torch.abs(x0)
    v2 = x0.detach()
    return v2,
'''
INPUTS = [
    [((3, 2), 'float32', 'contiguous', 0)],
]
