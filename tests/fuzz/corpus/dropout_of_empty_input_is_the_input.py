"""`F.dropout(x, 0.5)` (training) of an input with no element: eager returns the input
itself (ATen's `_dropout_impl` returns its input when it has no element), every backend
returned a new tensor (the output aliasing differed).  Found by the thorough profile
(Nov 27, session 9, main 334200a, program 2623; shrunk by hand).  Fixed: the dropout
entry (refcomp/tracer/torch_ops.py) returns its operand for an input with a 0 size."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias"
SOURCE = '''
def f(x0):
    v2 = F.dropout(x0, 0.5)
    return v2, torch.rrelu(x0, training=True)
'''
INPUTS = [
    [((1, 4, 1), 'float32', 'step', 22)],
    [((0, 3, 1), 'float32', 'step', 23)],
]
