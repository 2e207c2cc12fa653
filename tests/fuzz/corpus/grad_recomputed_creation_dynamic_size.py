"""A crash in backward (every backend) after a recompile with dynamic sizes:
`F.linear(x1, torch.ones(2, x1.shape[-1]), torch.arange(2))`, x1 requiring grad.  The third
call's backward raised "full: size symbol(s) s1 are bound by no input of the graph"
(llvm, eager; interp: "TypeError: Cannot convert symbols to int").  Found by the gradient
soak (`--grad --seed 2`, interp and llvm, Nov 27).  Cause: the partitioner recomputes
constant creation in the backward (Note [Partition rule]); the weight's shape holds
x1's last size, and the backward reads neither x1 nor anything else of that size.  Fixed:
a recomputed value whose size symbols the backward's inputs do not bind is saved (Note
[Recomputed sizes], spec/autograd.md)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "llvm"]
SYMPTOM = "grad-crash: EagerError: full: size symbol(s) s are bound by no input of the graph (or fused body) it i"
SOURCE = '''
def f(x0, x1, x2):
    v1 = F.linear(x1, torch.ones(2, x1.shape[-1], dtype=x1.dtype), torch.arange(2, dtype=x1.dtype))
    return v1,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 4, 1, 2), 'int64', 'expanded', 562), ((2, 4, 1, 2), 'float64', 'contiguous', 74), ((), 'float64', 'contiguous', 770)],
    [((2, 4, 3, 3), 'int64', 'expanded', 563), ((2, 4, 3, 3), 'float64', 'contiguous', 75), ((), 'float64', 'contiguous', 771)],
    [((3, 3, 1, 4), 'int64', 'expanded', 564), ((3, 3, 1, 4), 'float64', 'contiguous', 76), ((), 'float64', 'contiguous', 772)],
]
