"""`x1.index_fill_(0, torch.tensor([0]), 2.0)` of a float64 [0] input at storage offset 1
(after a [1] call): eager raises RuntimeError "setStorage: sizes [1], strides [0], storage
offset 1 ... out of bounds"; refcomp's runtime bounds check raised IndexError on every
backend (a wrong exception; found by the torch-level thorough profile, session 18, on
a6bbafa, program 17,610).  The class of corpus index_fill_of_empty_input, fixed by the
same change (92a67dc: index_fill_ of a tensor with no elements breaks and eager runs it)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "wrong-exception: IndexError: index is out of bounds for dimension with size 0"
SOURCE = '''
def f(x0, x1):
    x1.index_fill_(0, torch.tensor([0]), 2.0)
    return x0, x1,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1,), 'float32', 'expanded', 44), ((1,), 'float64', 'offset', 1)],
    [((0,), 'float32', 'expanded', 45), ((0,), 'float64', 'offset', 2)],
    [((3,), 'float32', 'expanded', 46), ((3,), 'float64', 'offset', 3)],
]
