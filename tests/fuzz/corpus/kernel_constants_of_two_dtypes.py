"""Two equal constants of different dtypes in one fused kernel (llvm): `x0 > 0` of a float32
x0 holds a float32 0, and `x1.relu()` of a float64 x1 a float64 0 (max(x, 0)).  The
kernel recorder (codegen/lower.py `_Recorder`) shared one Let per (op, operands, attrs)
and a constant's dtype was not in that key, so relu got the float32 0 and LLVM's `select`
asserted on mismatched operand types; the symbolic-size retry then raised IndexError on
the AssertionError's empty message (refcomp/api.py `_pin_failed_symbols`).  Found by the
thorough hypothesis profile on llvm (Nov 27, main 0aa83d1; the full program had a break
after `F.relu_(x1)`).  Fixed: a Let's dtype is part of the recorder's key, and a failure
without a message names no symbol (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: IndexError: list index out of range"
SOURCE = '''
def f(x0, x1):
    return torch.where(x0 > 0, 2, x1.relu()), (x0 > 0) & (x1.relu() > 1)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((1,), 'float32', 'contiguous', 0), ((), 'float64', 'contiguous', 0)],
    [((3, 2), 'float32', 'transposed', 1), ((2,), 'float64', 'contiguous', 2)],
]
