"""`x1.copy_(x0)` then `x0.add_(x0)`: x1 must keep x0's old value.  The graph's new value
of x1 is the input x0 itself (the copy is that value), so the backend handed back x0's
tensor as x1's write-back source, and `Entry.run` wrote x0 back first: x1 got x0's new
value (4 where eager has 2) on the eager and llvm backends, for any shape and dtype, and
likewise through a view (`x1.copy_(x0.t())`).  Wrong since at least a6bbafa; found by the
torch-level thorough profile (session 19, main 73ef869, program 8,225).  Fixed: such
write-back sources are copied before any write-back (Note [Write-back sources],
refcomp/runtime.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "input"
SOURCE = '''
def f(x0, x1):
    x1.copy_(x0)
    v1 = torch.hstack([x1, x1])
    v2 = x0.view(-1)
    x1.flip(0).add_(1)
    x0.add_(x0)
    return x0,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'int32', 'contiguous', 160), ((), 'int32', 'contiguous', 240)],
    [((), 'int32', 'contiguous', 161), ((), 'int32', 'contiguous', 241)],
]
