"""A view of an input through two unbinds (`x.unbind(2)[0].unbind(0)[0]`), returned: after
the second call recompiles with a dynamic size the output has stride (1,) where eager has
(3,) (all backends).  Found on llvm by the 40-min soak of Nov 24 (/work/soak-11.txt).  The class of transpose_output_after_recompile: a view with a dynamic
size and a layout other than its input's is returned as a copy (Note [Returned views]).
Fixed: the traced view ops are replayed on the caller's tensor."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride: call 1: out[0]: strides (1,), eager (3,)"
SOURCE = '''
def f(x0):
    v1 = x0.unbind(2)[0]
    v2 = v1.unbind(0)[0]
    return v2,
'''
INPUTS = [
    [((4, 4, 3), 'int64', 'contiguous', 211)],
    [((5, 4, 3), 'int64', 'contiguous', 212)],
]
