"""`torch.native_batch_norm(..., training=False)` returns its saved mean and inverse std
empty, shape (0,), on the CPU; torch's meta kernel says (3,) (one per channel), and the
opaque node was typed so: `interp` raised (the runner checks the shape), `llvm` read past
the empty tensor (`r[1] + 1`: a segfault), `eager` alone was right.  Found while fixing
batch norm's layout (Nov 27, main 9ad890a).  Fixed: in evaluation (training=False,
`_native_batch_norm_legit_no_training`, `_batch_norm_no_update`) the opaque batch-norm
ops' saved statistics are typed (0,) (eager_layout.batch_norm_in_eval) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: InterpreterError: aten produced shape (0,), but its type is f32[3]"
SOURCE = '''
def f(x0):
    r = torch.native_batch_norm(x0, torch.ones(3), torch.zeros(3), torch.zeros(3),
                                torch.ones(3), False, 0.1, 1e-5)
    s = torch.ops.aten._native_batch_norm_legit_no_training(
        x0, None, None, torch.zeros(3), torch.ones(3), 0.1, 1e-5)
    return r[0], r[1] + 1, r[2].sum(), s[1] * 2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((2, 3, 4), 'float32', 'contiguous', 0)],
]
