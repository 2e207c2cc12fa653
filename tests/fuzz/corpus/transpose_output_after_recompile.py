"""A returned `x.t()` after a recompile with a dynamic size: interp returns a contiguous
copy (strides (3, 1), eager (1, 2)) that does not alias the input.  Fixed: the traced
view ops are replayed on the caller's tensor (Note [Returned views])."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "stride: call 1: strides (3, 1), eager (1, 2)"
SOURCE = '''
def f(x0):
    v1 = torch.abs(x0)
    v2 = x0.t()
    return v2,
'''
INPUTS = [
    [((1, 2), 'float32', 'contiguous', 0)],
    [((3, 2), 'float32', 'contiguous', 0)],
]
