"""A crash where eager runs (llvm only; gradient mode): `w1[None] *= 3` on a clone of an
input that requires grad breaks at the STORE_SUBSCR (RB010: the store overwrites a tensor
that requires grad without reading it), so the in-place multiply runs in CPython on the
view `w1[None]` the graph left on the stack.  With 4 rows that view is rebuilt on the
graph's output (Note [Views of outputs]); with 0 rows the llvm backend returns it from the
compiled autograd Function itself, and autograd forbids the in-place op: "Output 0 of
Unsqueeze is a view and is being modified inplace. This view was created inside a custom
Function".  interp and eager run it.  Found by the gradient soak (seed 1703 on aa0d5ee,
program 2,211, session 16, found at the end of the session), shrunk by hand.  Fixed: a compiled
autograd Function tells a view of its own buffer from a view of an input by the view's
base where the storage is empty (its address is 0, as an empty input's is), so it returns
the detached alias (Note [Views of the Function's buffers]); and the store after
`w1[None] *= 3` copies the view's elements onto themselves, so it reads them and no
longer breaks (issue 33)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["llvm"]
SYMPTOM = "crash: RuntimeError: Output  of Unsqueeze is a view and is being modified inplace."
SOURCE = '''
def f(x0):
    w1 = x0.clone()
    w1[None] *= 3
    return w1,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((0, 3), 'float32', 'contiguous', 259)],
]
