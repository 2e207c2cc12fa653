"""A wrong gradient (interp, llvm; gradient mode): `x0.std()` of an expanded input
(stride 0: every element equal).  Eager's variance (Welford) is exactly 0 for equal
elements, so its std's gradient is the masked 0 (spec/autograd.md, std); refcomp's
two-pass variance rounds the mean of equal float32 values (3a / 3 != a), so the variance
is a few ulps, not 0, and the gradient (x - mean) / ((N - 1) std) is O(1) noise (-0.41
on llvm where eager gives 0).  Found by the session-12 gradient soak (seed 2116, program
15,262, main f09c5ba).  Open: it needs a variance that is exact for equal elements, as
ATen's is (issue 11)."""
STATUS = "open"
BACKENDS = ['interp', 'llvm']
SYMPTOM = 'grad-value'
GRAD = True
SOURCE = '''
def f(x0):
    v1 = x0.std()
    return [v1, x0]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3,), 'float32', 'expanded', 117)],
    [((3,), 'float32', 'expanded', 118)],
]
