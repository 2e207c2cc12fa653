"""`torch.as_strided_copy(x0, (2, 2), (1, 2), 0)` of an input that is itself a view at
storage offset 3 (`base[1:]`): the explicit offset 0 counts from the start of x0's
storage, so eager reads `base[0]`'s elements, before x0's first; `interp` hands ATen a
fresh copy of x0 (offset 0) and reads x0's own first elements.  `llvm` and `eager` hand
ATen the caller's tensor and agree with eager.  Found while fixing
as_strided_of_transposed_storage (Nov 27).  Fixed: the tracer took a graph input's
storage offset to be 0 (its meta has none, and TENSOR_MATCH does not check it); a
storage reader with an explicit offset into a graph input's storage now guards that
input's `storage_offset() == 0` (EQUALS_MATCH) and runs at a break where it is not 0
(Note [Input storage offsets] in refcomp/tracer/opaque.py) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    return torch.as_strided_copy(x0, (2, 2), (1, 2), 0)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((3, 3), 'float32', 'offset', 0)],
]
