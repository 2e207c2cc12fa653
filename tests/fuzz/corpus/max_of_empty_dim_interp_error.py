"""`max` over an empty dim, returned: eager raises IndexError, the interp backend its own
InterpreterError (argmax of an empty sequence).  Fixed (Nov 24): max/min over an empty
dim (or of an empty tensor, no dim) break to eager, which raises, since torch's meta
kernels accept them (refcomp/tracer/torch_ops.py, `_minmax_builder`)."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "wrong-exception: InterpreterError: argmax failed: attempt to get argmax of an empty sequence"
SOURCE = '''
def f(x0):
    return x0.max(-1)[1]
'''
INPUTS = [
    [((2, 0), 'float32', 'contiguous', 0)],
]
