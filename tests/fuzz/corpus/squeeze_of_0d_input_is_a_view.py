"""`x.squeeze(0)` / `x.squeeze()` of a 0-d input, returned: eager returns a view of x (shares
its storage); refcomp returned a copy on every backend.  The squeeze entry types a 0-d
operand's squeeze as the operand's own value (`_Copy`, since 0994584: the IR's squeeze had
no dim to drop), which counted as a view only for `detach`.  Found x1 per backend by the
soak of Nov 24 (seed 1202, 7d93448) in a longer program; shrunk by hand."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with input: [], eager [0]"
SOURCE = '''
def f(x0):
    v1 = x0.squeeze(0)
    print(end='')
    return v1, x0.squeeze()
'''
INPUTS = [
    [((), 'bool', 'contiguous', 670)],
    [((), 'float32', 'contiguous', 671)],
]
