"""`F.linear` with a bias (or weight) of another dtype than the input: eager raises
RuntimeError (ATen's mm/addmm promote nothing); refcomp traced matmul and add, which
promote, and returned a result.  Found while fixing linear_bf16_bias_rounds_once (Nov 27),
by hand.  Fixed: `_linear` breaks (RB017) where the operands' dtypes differ, and eager
raises at the break (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise"
SOURCE = '''
def f(x0, x1):
    return F.linear(x0, torch.ones(3, x0.shape[-1]), x1),
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 2), 'float32', 'contiguous', 0), ((3,), 'bfloat16', 'contiguous', 1)],
    [((2, 4, 2), 'float64', 'contiguous', 2), ((3,), 'float64', 'contiguous', 3)],
]
