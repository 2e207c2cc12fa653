"""`F.embedding_bag(idx, w, offsets)` with a transposed weight `w` crashes on `interp`:
InterpreterError: aten produced shape (0,), but its type is i64[5].  ATen's CPU kernel
takes its fast path (no `offset2bag`: shape (0,)) only for a weight whose rows are
contiguous; eager's weight is transposed, so eager and the meta kernel say (5,), but
`interp` hands ATen a fresh row-major copy of each operand, the fast path runs and the
node's auxiliary result has another shape than its type.  `llvm` and `eager` hand ATen
the caller's tensor and agree with eager.  Found by `python -m tests.opinfo.runner
--layout transposed --backend interp --samples 3` (nn.functional.embedding_bag; Nov 27,
main 334200a).  Fixed: every opaque node gets its operands in eager's strides (Note
[Operands in eager's layout], refcomp/tracer/eager_layout.py; it was only nodes that
draw random numbers)."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "crash: InterpreterError: aten produced shape (0,), but its type is i64[5]"
SOURCE = '''
def f(x0):
    idx = torch.tensor([0, 2, 1, 3, 0])
    off = torch.tensor([0, 2])
    return F.embedding_bag(idx, x0, off, mode="sum")
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((4, 3), 'float32', 'transposed', 0)],
]
