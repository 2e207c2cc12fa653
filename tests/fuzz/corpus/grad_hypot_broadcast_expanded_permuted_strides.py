"""Wrong output strides (interp, eager, llvm; gradient mode, at the second call's sizes):
`torch.hypot(x1, v2)` of a float32 [5, 4] input expanded (stride 0 in dim 0) and
`v2 = x2.exp()` of a permuted float64 [4, 5, 4] input.  Eager's TensorIterator orders
the broadcast result's dims by the operands' strides: (1, 16, 4); refcomp's result had
(1, 4, 20).  The values are right.  Found by the session-12 gradient soak (seed 2116,
program 16,345, main f09c5ba).  Cause: TensorIterator's compute_types casts a CPU input of
another dtype (`.to(common)`, row-major for the expanded one) before it picks the layout,
and refcomp's port ordered by the uncast operands.  Fixed: `iterator_strides` takes the
common dtype (refcomp/tracer/eager_layout.py; tests/frontend/test_eager_layout.py;
issue 11)."""
STATUS = "fixed"
BACKENDS = ['interp', 'eager', 'llvm']
SYMPTOM = 'stride'
GRAD = True
SOURCE = '''
def f(x0, x1, x2):
    v1 = torch.outer(x1.flatten(), x1.flatten()[:3])
    v2 = x2
    if x2.is_floating_point():
        v2 = v2.exp()
    v3 = torch.hypot(x1, v2)
    v4 = torch.eq(v3, x1)
    return v3, x0,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 4, 1), 'int64', 'contiguous', 200), ((4, 1), 'float32', 'expanded', 228), ((4, 4, 1), 'float64', 'permuted', 488)],
    [((4, 5, 4), 'int64', 'contiguous', 201), ((5, 4), 'float32', 'expanded', 229), ((4, 5, 4), 'float64', 'permuted', 489)],
]
