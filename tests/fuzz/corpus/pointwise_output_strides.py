"""A pointwise op on a permuted input keeps the input's memory order in eager
(TensorIterator); refcomp returns a contiguous tensor.  Fixed (Nov 24): an `ir_meta`
pointwise entry's meta takes torch's elementwise output strides of its operands
(`compute_elementwise_output_strides`, refcomp/tracer/torch_table.py), so Note [Output
layout] restrides the result to eager's memory order."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "stride: strides (6, 3, 1), eager (1, 2, 6) for a permuted input"
SOURCE = '''
def f(x0):
    return x0 > 0.5
'''
INPUTS = [
    [((3, 2, 3), 'float32', 'permuted', 0)],
]
