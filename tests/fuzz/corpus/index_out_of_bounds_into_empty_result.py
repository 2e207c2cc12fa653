"""An index tensor out of bounds for its dim, where another dim of the indexed tensor is 0:
eager's result is empty and nothing is raised (ATen checks each index as it copies an
element); refcomp's runtime bounds check raised IndexError on every backend (found by the
thorough profile's per-backend run on the eager backend, Nov 27, main 2a3452b, as
`x0[..., torch.tensor([1, 0])]` of an int64 [0, 1, 1] after a [1, 1, 2] call).  Fixed: no
check when another dim is 0 (refcomp/tracer/tensor_layout.py, `_check_index_bounds`)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: IndexError: index out of bounds for dimension 2 with size 1"
SOURCE = '''
def f(x0):
    v1 = torch.abs(x0)
    print(end='')
    v5 = x0[..., torch.tensor([1, 0])]
    return x0, v5 + 1
'''
INPUTS = [
    [((1, 1, 2), 'int64', 'contiguous', 0)],
    [((0, 1, 1), 'int64', 'contiguous', 1)],
    [((1, 1, 2), 'int64', 'contiguous', 2)],
    [((2, 1, 1), 'float32', 'contiguous', 3)],
]
