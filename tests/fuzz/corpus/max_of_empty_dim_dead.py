"""`max` over an empty dim whose result is unused: eager raises IndexError ("Expected
reduction dim 1 to have non-zero size"); refcomp drops the dead op and returns (soak,
size-0 dims).  Fixed (Nov 24): max/min over an empty dim (or of an empty tensor,
no dim) break to eager, which raises, since torch's meta kernels accept them (refcomp/tracer/torch_ops.py, `_minmax_builder`)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise: eager raised IndexError: max(): Expected reduction dim 1 to have non-zero size"
SOURCE = '''
def f(x0):
    v5 = x0.max(-1)[1]
    return x0 + 1
'''
INPUTS = [
    [((2, 0), 'float32', 'contiguous', 0)],
]
