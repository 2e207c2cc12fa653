"""A dead `index_select` of an empty tensor: eager raises RuntimeError ("self indexing axis
dim should be positive"), the interp backend its own InterpreterError (wrong type).
Found x3 by the 15-min soak of Nov 24, /work/soak-11b.txt.  Fixed: a RuntimeError that
torch raised inside an `aten` node is re-raised as RuntimeError (codegen/interp.py)."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "wrong-exception: InterpreterError: aten failed: index_select(): self indexing axis dim should be positive"
SOURCE = '''
def f(x0, x1):
    v1 = x0.flip(0)
    v2 = torch.mul(x1, 3)
    v3 = x1.split([1, x1.shape[-3] - 1], -3)[1]
    v4 = v1.index_select(0, torch.tensor([0]))
    return x1
'''
INPUTS = [
    [((4, 2, 4, 1), 'float64', 'contiguous', 16), ((2, 4, 4), 'float32', 'contiguous', 75)],
    [((0, 2, 4, 1), 'float64', 'contiguous', 17), ((2, 4, 4), 'float32', 'contiguous', 76)],
]
