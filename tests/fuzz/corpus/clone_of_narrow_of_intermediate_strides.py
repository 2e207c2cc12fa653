"""A clone of a narrowed intermediate: eager's clone is dense (strides (4, 4, 1) for shape
(2, 1, 4)); llvm returned the narrow view of the kernel's (x0 + 1) buffer, strides
(12, 4, 1).  The IR folds the clone (it computes nothing), and the view shares memory only
with an intermediate nobody else sees, so no aliasing rule copies it.  Found x3 on llvm by
the soak of Nov 27 (`--seed 1128`, main 5d5c706) at program 2729, as
`v2.to(v2.dtype, copy=True)` of `x0.add(-1).narrow(1, 0, 1)` of a bool input beside a sum
of v2; shrunk by hand (`clone` and `to(copy=True)` fail alike).  Fixed: an output whose
eager strides are row-major and that the backend may hand back as a view of another value
(refcomp/aliasing.py, `outputs_maybe_views`) is made contiguous when it is not, on llvm and
triton too (Note [Output layout] in refcomp/runtime.py)."""
STATUS = "fixed"
BACKENDS = ["llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v2 = (x0 + 1).narrow(1, 0, 1)
    return v2.clone(), v2.to(v2.dtype, copy=True), v2.sum()
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4), 'float32', 'contiguous', 0)],
    [((3, 3, 4), 'float32', 'contiguous', 1)],
]
