"""Wrong output strides (llvm): `torch.sort(x0, dim=2).indices.contiguous()` of a
permuted input.  The IR folds `.contiguous()` into the sort, an opaque `aten` call whose
result ATen lays out like its operand (strides (1, 2, 6)); the llvm backend promises
row-major outputs (Backend.row_major), so refcomp checked only outputs that may be views
and handed back the permuted tensor where eager's is (3, 1, 1).  Found by the session-13
forward soak (seed 2202, program 4,748, main 1e90399; present on 8b420f3 too).  Fixed: an
output that an `aten` node returns is made row-major where eager's is, as a view's is
(Note [Output layout], refcomp/runtime.py) (issue 11)."""
STATUS = "fixed"
BACKENDS = ['llvm']
SYMPTOM = 'stride'
SOURCE = '''
def f(x0, x1):
    v3 = torch.sort(x0, dim=2, stable=True).indices
    v4 = v3.contiguous()
    return [x0, v4, v4]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 3, 1), 'float16', 'permuted', 128), ((1,), 'float32', 'offset', 971)],
]
