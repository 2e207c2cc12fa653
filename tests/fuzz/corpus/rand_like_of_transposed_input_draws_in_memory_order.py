"""`torch.rand_like(x)` of a transposed input: eager fills the new tensor (x's layout) in
memory order, so each draw lands at another index than on a row-major tensor; every
backend drew row-major.  Found by the OpInfo layout run (`normal.in_place`), Nov 27,
session 9.  Fixed: Note [Random draws in eager's layout] (refcomp/tracer/eager_layout.py):
the IR's random ops carry the memory `order` eager fills."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = torch.rand_like(x0) + x0
    v2 = F.dropout(x0, 0.5)
    return v1, v2
'''
INPUTS = [
    [((3, 5), 'float32', 'transposed', 0)],
    [((2, 3, 4), 'float32', 'permuted', 1)],
]
