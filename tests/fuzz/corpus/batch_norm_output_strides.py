"""ATen's CPU batch norm allocates its result `empty_like(input, format)`: the memory
format the input is contiguous in when the input, weight and bias are all contiguous,
else the input's suggested format; never the input's own order.  refcomp differed twice:
`torch.native_batch_norm` of a transposed 3-d input (an opaque `aten` node) took its meta
kernel's strides, which keep the input's order ((12, 1, 3) for shape (2, 3, 4), eager
(12, 4, 1)); `F.batch_norm` (typed from the IR) of an input that is channels_last
contiguous only through its size-1 dims (shape (1, 3, 1, 2), strides (1, 1, 3, 3): eager
(6, 1, 6, 3)) came back row-major, its channels_last test being torch's Python
suggest_memory_format.  Values were equal.  Found by `python -m tests.opinfo.runner
--layout transposed` (native_batch_norm, _native_batch_norm_legit,
_batch_norm_with_update) and probing eager (Nov 27, main 37e1917).
Fixed: refcomp/tracer/eager_layout.py's batch_norm_strides ports the CPU kernel's rule;
the F.batch_norm entry and the opaque batch-norm ops take it (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0, x1):
    v1 = torch.native_batch_norm(x0, torch.ones(3), torch.zeros(3), torch.zeros(3),
                                 torch.ones(3), True, 0.1, 1e-5)[0]
    v2 = F.batch_norm(x1, torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3))
    return v1, v2 * 2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4), 'float32', 'transposed', 0), ((1, 3, 1, 2), 'float32', 'permuted', 1)],
]
