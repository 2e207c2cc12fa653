"""`torch.ones(x0.shape) * x0` with x0 transposed: eager's result is row-major (its first
operand is), the eager backend's was column-major, since the passes put the commutative
product's operands in another order and torch then followed x0's layout (found by the
autocast fuzz, tests/frontend/test_fuzz_autocast.py; the same without autocast).  Open:
restriding row-major results too (Note [Output layout]) needs truthful metas first, since
`ir_meta` ops (pointwise_output_strides) report row-major strides where eager's are not,
and restriding to them broke that program on the eager backend.  Fixed (Nov 24) without
that: the product folds to x0, a fresh output, and a fresh output whose eager layout is
row-major is now cloned row-major (Entry.fresh_row_major, refcomp/runtime.py)."""
STATUS = "fixed"
BACKENDS = ["eager"]
SYMPTOM = "stride: out[0]: strides (1, 2), eager (2, 1) (shape (2, 2))"
SOURCE = '''
def f(x0, x1):
    v1 = torch.ones(x0.shape, dtype=torch.float32) * x0
    v2 = torch.abs(x0)
    return v1,
'''
INPUTS = [
    [((2, 2), 'float32', 'transposed', 0), ((), 'float32', 'contiguous', 0)],
]
