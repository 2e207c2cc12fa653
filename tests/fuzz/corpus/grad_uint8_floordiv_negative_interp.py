"""A crash where eager runs (interp only; gradient mode): `v2 // -3` of a uint8 tensor.
The interp backend builds the divisor as a `full` of dtype uint8, and NumPy 2 refuses the
value: "InterpreterError: full failed: Python integer -3 out of bounds for uint8"; eager
divides (torch wraps the scalar).  Found by the gradient soak (seed 1703 on aa0d5ee,
program 3,848, session 16, found at the end of the session), shrunk by hand.  Open."""
STATUS = "open"
GRAD = True
BACKENDS = ["interp"]
SYMPTOM = "crash: InterpreterError: full failed: Python integer - out of bounds for uint"
SOURCE = '''
def f(x0):
    v2 = (x0 * 100).to(torch.uint8)
    v3 = v2 // -3
    return v3, x0.sum()
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3,), 'float64', 'contiguous', 230)],
]
