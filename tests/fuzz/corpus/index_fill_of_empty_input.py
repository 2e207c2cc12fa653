"""`x0.index_fill_(0, torch.tensor([0]), -1.5)` of an int32 [0, 0, 0] input after two
[3, 3, 3] calls: eager fills nothing and raises nothing (an empty tensor's checks depend
on which dim is empty: none here, a RuntimeError from setStorage for [0, 3] along dim 0);
refcomp's runtime bounds check raised IndexError on every backend (found by the torch-level
thorough profile, session 18, main a6bbafa, program 5,398).  Fixed: index_fill_ of a
tensor with no elements breaks and eager runs it (refcomp/tracer/torch_ops.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: IndexError: index is out of bounds for dimension with size 0"
SOURCE = '''
def f(x0, x1):
    v1 = x1.masked_fill(x1 > 0, 3)
    v2 = torch.sum(x0, -2, keepdim=True)
    x0.index_fill_(0, torch.tensor([0]), -1.5)
    v3 = v2.cumprod(dim=1)
    v4 = v3.sum([-1])
    v5 = torch.clamp(v3, min=-1.5)
    v6 = x1.clamp(max=1e-3)
    return [v6, v3, v3]
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 3, 3), 'int32', 'permuted', 673), ((1,), 'float32', 'contiguous', 982)],
    [((3, 3, 3), 'int32', 'permuted', 674), ((1,), 'float32', 'contiguous', 983)],
    [((0, 0, 0), 'int32', 'permuted', 675), ((1,), 'float32', 'contiguous', 984)],
]
