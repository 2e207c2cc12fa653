"""A returned view of a column-major intermediate after a recompile with dynamic sizes:
`(x0.t() + 1)[::2]` has eager's strides (2, 6) for shape (3, 5) (the sum follows x0.t()'s
memory order, the slice steps through it); interp returned (5, 1) and llvm (10, 1).  Note
[Views of outputs] replayed the view on its base only where the base is row-major or has
static sizes, so here the view stayed a graph output (interp: a copy; llvm: a view of a
row-major kernel buffer).  Found by fuzzfix probing output layouts by hand, Nov 27
(main 5232466).  Fixed: the replay needs only a dense base, since Note [Output layout]
restrides a dense base with dynamic sizes to eager's dim order (refcomp/runtime.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    return (x0.t() + 1)[::2]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 6), 'float32', 'contiguous', 0)],
    [((5, 6), 'float32', 'contiguous', 1)],
]
