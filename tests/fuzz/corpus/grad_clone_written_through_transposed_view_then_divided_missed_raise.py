"""A missed raise (gradient mode): `w1 = x0.clone()`, a write through `w1.transpose(0,
-1)[-1:]`, `torch.maximum(x0, w1)` (which saves w1), then `w1.div_(2)`: eager's backward
raises "one of the variables needed for gradient computation has been modified by an
inplace operation"; refcomp's ran (found by the gradient part of the thorough profile,
session 18, on a6bbafa, program 136).  The tracer folded the clone into x0's value, the
class of Note [Clones under grad] (spec/autograd.md), fixed on main by 6b5023f."""
GRAD = True
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-missed-raise: eager raised RuntimeError: one of the variables needed for gradient computation has been m"
SOURCE = '''
def f(x0, x1):
    w1 = x0.clone(memory_format=torch.contiguous_format)
    w1.transpose(0, -1)[-1:].mul_(2)  # must capture
    v2 = torch.cat([w1, x0], dim=-1)
    v3 = torch.maximum(x0, w1)
    w1.div_(2)
    v4 = F.softmax(v2 * 2, dim=-1)
    v5 = v3.index_fill(0, torch.tensor([0]), 3)
    v6 = x1.cumsum(0)
    return [v5, v2]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3,), 'float32', 'offset', 14), ((3,), 'float32', 'contiguous', 669)],
    [((3,), 'float32', 'offset', 15), ((3,), 'float32', 'contiguous', 670)],
    [((1,), 'float32', 'offset', 16), ((1,), 'float32', 'contiguous', 671)],
]
