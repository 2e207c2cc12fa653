"""A returned view of an input that the function mutated in place: eager returns a view
sharing the input's storage; refcomp returns a copy (found by the soak as
`x0 /= 3; v1 = x0.view_as(x0); return v1, v1`).  Fixed: the view is rebuilt on the caller's
tensor after the write-back (spec/correctness.md, Note [Returned views])."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out shares storage with input: [], eager [0]"
SOURCE = '''
def f(x0):
    x0.add_(1)
    return x0[1:]
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
