"""`.int()` of a NaN (nanmean over an empty dim, then `v2[i] * i`): eager's CPU cast
gives -2147483648 (x86's truncating conversion: NaN and out-of-range values become the
type's minimum), llvm gave 0 (a saturating conversion).  The same rule made
`(x * 255).to(torch.uint8)` of a negative x 0 on llvm where eager wraps (-2.5 -> 254),
and `300.0` -> int8 127 where eager gives 44.  Found by soak seed 4001 (Nov 27, session 9,
program 929).  Fixed: Note [Float to int as eager's CPU kernel] (codegen/llvm/scalar.py,
and the reference `cast` in ir/ops/pointwise.py for the f64 -> uint8 case)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = x0 == x0
    v2 = torch.nanmean(x0, -1)
    v3 = torch.stack([v2[i] * i for i in range(v2.shape[0])])
    v4 = v3.split([1, v3.shape[-1] - 1], -1)[1]
    v6 = v4.int()
    return v6, v4, v2,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 1), 'float32', 'contiguous', 727)],
    [((4, 0), 'float32', 'contiguous', 728)],
    [((3, 1), 'float32', 'contiguous', 729)],
]
