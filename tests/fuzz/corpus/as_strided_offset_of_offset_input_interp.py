"""`torch.as_strided_copy(x0, (2, 2), (1, 2), 0)` of an input that is itself a view at
storage offset 3 (`base[1:]`): the explicit offset 0 counts from the start of x0's
storage, so eager reads `base[0]`'s elements, before x0's first; `interp` hands ATen a
fresh copy of x0 (offset 0) and reads x0's own first elements.  `llvm` and `eager` hand
ATen the caller's tensor and agree with eager.  Found while fixing
as_strided_of_transposed_storage (Nov 27).  Open: the tracer takes a graph input's
storage offset to be 0 (its meta has none, and no guard checks it), so it cannot tell
this call from one on a tensor at offset 0 (STORAGE_READERS in
refcomp/tracer/opaque.py); breaking on every explicit offset would lose OpInfo's
as_strided samples, which pass offset 0."""
STATUS = "open"
BACKENDS = ["interp"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    return torch.as_strided_copy(x0, (2, 2), (1, 2), 0)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((3, 3), 'float32', 'offset', 0)],
]
