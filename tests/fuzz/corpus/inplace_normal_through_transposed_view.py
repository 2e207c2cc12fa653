"""`x1.normal_()` of a transposed input, `(x0.t() * 1).uniform_()`: eager draws into a
tensor in its memory order (and ATen's normal_ draws one number per element on a
non-contiguous tensor, in blocks on a contiguous one of 16 or more).  interp handed ATen
a row-major copy of x1, and llvm handed ATen its own layout of `x0.t() * 1` (the IR folds
`* 1`: a transposed view of x0), so the draws landed elsewhere.  Found by the OpInfo
layout run (`normal.in_place`), Nov 27, session 9.  Fixed: a call that draws gets its
operands in eager's strides (`layouts`, codegen/opaque.py; Note [Random draws in eager's
layout])."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0, x1):
    x1.normal_(0, 2)
    v2 = x0.t() * 1
    v2.uniform_()
    return v2,
'''
INPUTS = [
    [((4, 5), 'float32', 'transposed', 0), ((3, 5), 'float32', 'transposed', 2)],
    [((4, 5), 'float32', 'transposed', 1), ((4, 6), 'float32', 'transposed', 3)],
]
