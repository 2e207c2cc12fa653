"""A pointwise result of `x.contiguous()` of a permuted input: eager computes it from the
row-major copy, so it is row-major (strides (2, 2, 1) for shape (3, 1, 2)); the eager
backend returns it in the input's permuted order ((1, 3, 3)), on the first call already.
interp and llvm are right.  Found x3 on eager by the soak of Nov 24 (`--seed 1124`, main
12bf5a9) at program 1111, in this form (bfloat16, a shape-dependent `if`).  Cause: the IR
folds `contiguous` into `x0`, and the eager backend runs `mul` as ATen's, which follows
its operand's (permuted) memory order.  Fixed: on a backend whose results may follow their
operands' memory order, an output whose eager strides are row-major is made contiguous
when it is not (Note [Output layout] in refcomp/runtime.py)."""
STATUS = "fixed"
BACKENDS = ["eager"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = x0.contiguous()
    if v1.shape[0] > 1:
        v2 = v1 * 2
    else:
        v2 = v1.sum(0)
    return x0, v1, v2,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((3, 1, 2), 'bfloat16', 'permuted', 52)],
    [((2, 1, 2), 'bfloat16', 'permuted', 53)],
    [((3, 1, 2), 'bfloat16', 'permuted', 54)],
]
