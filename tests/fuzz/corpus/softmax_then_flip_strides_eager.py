"""A view of a decomposed op's result on the eager backend: `x.softmax(-2).flip(2)` of a
transposed float64 input has eager's strides (8, 2, 1) for shape (3, 4, 2) (torch's
softmax kernel writes a row-major result); the eager backend returned (8, 1, 4), the
input's order, since it runs softmax as its decomposition (amax, sub, exp, sum, div),
whose ATen pointwise ops follow their operand's memory order.  interp and llvm are
right.  Found by the soak of Nov 27 (`--seed 1127`, main 8e44794) at program 1661.
Fixed: on a backend whose results may follow their operands' memory order (the eager
backend), an output whose eager strides are row-major is made contiguous when it is not
(Note [Output layout] in refcomp/runtime.py)."""
STATUS = "fixed"
BACKENDS = ["eager"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = x0.softmax(dim=-2)
    v2 = v1.flip(2)
    return v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((3, 4, 2), 'float64', 'transposed', 885)],
    [((2, 5, 2), 'float64', 'transposed', 886)],
]
