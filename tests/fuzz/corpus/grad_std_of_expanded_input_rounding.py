"""A wrong gradient (interp, llvm; gradient mode): std over rows of equal elements (an
expanded input, stride 0).  Eager's std of several results is Welford's algorithm in f64,
exactly 0 for equal elements, so its gradient is the masked 0 (spec/autograd.md, std).
refcomp's variance was a two-pass in the input's dtype: the mean of three equal values a
is fl(fl(3a) / 3), often an ulp from a, so the variance was a few ulps and the gradient
(x - mean) / ((N - 1) std) was O(1) noise: 0.41 where eager gives 0.  Fixed: the variance
is a two-pass in f64 on the values shifted by their row's first element, Welford's answer
(Note [How ATen computes var], ir/passes/decompose.py; the llvm kernel of a var with a
symbolic count does the same).

Found by the session-12 gradient soak (seed 2116, program 15,262, main f09c5ba) as
`x0.std()` of a (3,) float32 expanded input.  That form is one result, which eager
computes otherwise (the mean in float32, rounded by the order of its vectorized sum): 0 in
one call, 7.3e-08 with gradient -0.41 in the other.  Its exact answer is 0, which refcomp
now gives; by spec/testing.md, "Ties", the exact answer decides there, and
tests/training/test_variance_of_equal_elements.py checks it.  This file replays the form
where eager's answer is the exact one: several results (std over dim 0 of (3, 2)), in
float64 (the old code failed on interp and llvm) and float32 (llvm) (issue 11)."""
STATUS = "fixed"
BACKENDS = ['interp', 'llvm']
SYMPTOM = 'grad-value'
GRAD = True
SOURCE = '''
def f(x0):
    v1 = x0.std(0)
    return [v1, x0]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 2), 'float64', 'expanded', 107)],
    [((3, 2), 'float32', 'expanded', 102)],
]
