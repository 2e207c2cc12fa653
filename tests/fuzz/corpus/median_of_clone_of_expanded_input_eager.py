"""A wrong value (eager backend only): `x.clone().median(-1).values` of an expanded input
(stride 0).  ATen's median along a dim of a stride-0 tensor is wrong itself (eager's
`x.median(-1)` of `tensor([4.]).expand(4)` gives NaN for float, -1 or other garbage for
int64, torch 2.13); the user's clone makes eager's operand row-major, so eager answers 4.
refcomp folds the clone (an IR copy is the identity), the opaque `aten` node records no
`layouts` entry for a row-major operand (Note [Operands in eager's layout]), and the eager
backend hands ATen the caller's expanded tensor; llvm and interp hold the value row-major
and answer 4.  Found by the torch-level soak (seed 1702 on aa0d5ee, program 1,312, session
16, found at the end of the session), shrunk by hand.  Fixed in session 17: an operand
with no `layouts` entry reaches ATen row-major unless eager's overlaps itself (the node's
`overlaps`; Note [Operands in eager's layout])."""
STATUS = "fixed"
BACKENDS = ["eager"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = x0.clone()
    v2 = v1.median(-1).values
    return v2,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4,), 'int64', 'expanded', 1000)],
    [((4,), 'float32', 'expanded', 1001)],
]
