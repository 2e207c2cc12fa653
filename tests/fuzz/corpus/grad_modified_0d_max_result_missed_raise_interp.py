"""A missed raise in backward (interp only; gradient mode): `v1 = x1.max()` of a 0-d x1, a
break, `v1.copy_(x1)`.  Eager's MaxBackward1 saved v1 (its result), so the backward
raises "one of the variables needed for gradient computation has been modified by an
inplace operation"; the eager and llvm backends raise too, the interp backend returns a
gradient.  Found by the session-11 gradient soak (seed 2112, programs 111-112, main
a252a66).  v1 and its clone are one IR value at two graph outputs; the compiled Function
saved that value for amax's backward, and interp made a separate tensor per output, so
the caller's copy_ never reached the saved one (the kernel backends return one buffer).
Fixed: interp returns one tensor per distinct output value (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0, x1):
    v1 = x1.max()
    v2 = v1.clone()
    v1.copy_(x1)
    return x0 * 2, v1
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'float32', 'contiguous', 512), ((), 'float64', 'contiguous', 209)],
]
