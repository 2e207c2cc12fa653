"""A pointwise result of a permuted input with dynamic sizes (the second call's): eager keeps
the operand's memory order (strides (1, 4, 12) for shape (4, 3, 2)); interp and llvm
returned it row-major, since Note [Output layout] restrided static shapes only.  Found x7
on interp and llvm by the soak of Nov 24 (seed 1202, 7d93448) in a longer program
(`OPAQUE(x0.swapaxes(0, 2).clone())`, bfloat16); shrunk by hand.  Fixed: with dynamic
sizes the entry keeps eager's dim order and restrides to it."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0, x1):
    v1 = x0.swapaxes(0, 2)
    v2 = x1.t().clone()
    return v1 * 2, v2, OPAQUE(v1.clone())
'''
INPUTS = [
    [((4, 2, 3), 'float32', 'contiguous', 1), ((4, 3), 'bfloat16', 'contiguous', 2)],
    [((2, 3, 4), 'float32', 'contiguous', 3), ((2, 5), 'bfloat16', 'contiguous', 4)],
    [((5, 3, 2), 'float32', 'contiguous', 5), ((6, 5), 'bfloat16', 'contiguous', 6)],
]
