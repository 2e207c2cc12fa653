"""A None gradient where eager's is zeros (interp and llvm): `x0.sign()` returned.  Eager
records sign's node (its derivative is zero), so `autograd.grad(..., allow_unused=True)`
gives a zero tensor (and `.grad` becomes zeros, not None).  Found by the gradient soak
(`--grad --seed 4`, Nov 27; 4 programs of 1,695 per backend) after 63c04b1.  Cause:
Note [Unused gradients] as landed in 63c04b1 kept an input's gradient only where the
backward graph read a given output gradient, and sign's VJP is a constant zero.  Fixed:
the dependency is read off the forward graph (floating values from the input to an
output that got a gradient), as eager's autograd graph has it."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "llvm"]
SYMPTOM = "grad-none"
SOURCE = '''
def f(x0, x1):
    v1 = x0.sign()
    v2 = x1.floor() + (x0 > 0)
    return v1, v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3,), 'float32', 'contiguous', 0), ((2, 3), 'float64', 'contiguous', 1)],
]
