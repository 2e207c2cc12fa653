"""`torch.as_strided_copy`, `torch.as_strided` (then used in the graph) and
`torch.as_strided_scatter` of a transposed input, and `as_strided` of an intermediate
that eager lays out transposed (`x0 + 1`): these address their operand's *storage*,
so eager's values depend on its memory layout; `llvm` and `interp` returned other values
(an opaque node gets its operands as the graph holds them: row-major).  Found by `python
-m tests.opinfo.runner --layout transposed --samples 3` (as_strided_copy#1,
as_strided_scatter#2; Nov 27, main ce2a754).  Fixed: an as_strided-family call runs in
the graph only where the graph's operand addresses the same elements (contiguous in
eager, no explicit storage offset, within its numel); otherwise at a break
(STORAGE_READERS in refcomp/tracer/opaque.py) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = torch.as_strided_copy(x0, (2, 2), (1, 2))
    v2 = torch.as_strided(x0, (2, 2), (1, 2)) * 2
    v3 = torch.as_strided_scatter(x0, torch.zeros(2, 2), (2, 2), (1, 2))
    v4 = torch.as_strided(x0 + 1, (2, 2), (1, 2)) + 1
    return v1, v2, v3, v4
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((3, 3), 'float32', 'transposed', 0)],
]
