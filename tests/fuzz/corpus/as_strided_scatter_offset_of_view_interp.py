"""`torch.as_strided_scatter(v, src, (2, 2), (1, 2), 0)` where `v` is a view at storage
offset 3 (`(x0 * 1).view(-1)[3:]`, an intermediate): ATen clones `v` with its storage
offset (`clone_preserve_strides`), so the explicit offset 0 counts from the storage's
start and only the element at offset 3, `v[0]`, is written; `interp` hands ATen a fresh
copy of `v` (offset 0) and wrote `v[0:4]`.  `llvm` and `eager` agree with eager.  The rule
for the as_strided family (STORAGE_READERS in refcomp/tracer/opaque.py) let an explicit
offset 0 through for as_strided_scatter whatever its operand's own offset, taking the
offset to count from its fresh clone.  Found while fixing
as_strided_offset_of_offset_input_interp (Nov 27).  Fixed: as_strided_scatter takes an
explicit offset only where its operand's own is 0, as as_strided does; otherwise a break
(issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    return torch.as_strided_scatter((x0 * 1).view(-1)[3:], torch.zeros(2, 2), (2, 2), (1, 2), 0)
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 3), 'float32', 'contiguous', 0)],
]
