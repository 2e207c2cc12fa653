"""A non-empty index tensor into a dim of size 0: `x0[torch.tensor([0, 1])]` of a (0, 3, 0)
or (0, 2) input.  Eager raises IndexError ("index is out of bounds for dimension with size
0": ATen's AdvancedIndex checks it before computing, even into a result with no element);
the graph's bounds check was skipped because the result has no element
(TraceContext.add_check), so the eager backend returned an empty tensor (a missed raise)
and llvm raised index_select's RuntimeError (another type).  Found while fixing
grad_index_of_empty_input_eager (Nov 27), by hand.  Fixed: that check is not skipped
(refcomp/tracer/tensor_layout.py `_check_index_bounds`) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise"
SOURCE = '''
def f(x0):
    return x0[torch.tensor([0, 1])] * 2,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((0, 3, 0), 'float32', 'contiguous', 0)],
    [((0, 2), 'float32', 'contiguous', 1)],
    [((4, 0), 'float32', 'contiguous', 2)],
]
