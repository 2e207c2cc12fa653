"""Wrong gradient (every backend): `x0.view_as(x0)` returned beside `x0`, where x0 is an
expanded float32 input (stride 0) that requires grad.  Eager's gradient of x0 has one
value per element (the weights of both outputs summed); refcomp's was the same value in
every element: the sum over the elements sharing one memory location, spread over them.
Found by the first gradient soak (`--grad --seed 1`, eager backend, Nov 27; 6 programs
of 3,252).  Cause: Note [Returned views] rebuilt the returned view of an input as
`as_strided` of the caller's tensor, and as_strided's backward works per memory
location, which is not per element when elements share memory.  Fixed: for an input
that requires grad and has internal overlap the view ops are replayed instead
(refcomp/runtime.py, `_Outputs.view_spec`)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0):
    v2 = x0.view_as(x0)
    v3 = x0.t()[1:]
    return x0, v2, v3
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4), 'float32', 'expanded', 305)],
    [((3, 4), 'float32', 'expanded', 306)],
]
