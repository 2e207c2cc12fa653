"""`F.batch_norm` of a float64 input with float32 running statistics: eager's CPU kernel
raises "mixed dtype (CPU): all inputs must share same datatype"; every backend computed
it (the batch_norm entry is typed from the IR, which promotes).  Found by soak seed 8001
(Nov 27, session 9, program 628).  Fixed: `_check_cpu_norm_dtypes` in
refcomp/tracer/torch_ops.py (batch_norm, layer_norm) breaks the graph there, and eager
raises; tests/frontend/test_mixed_dtype_norms.py walks the dtype pairs."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise"
SOURCE = '''
def f(x0, x1, x2):
    v2 = x0[x0 > 0]
    v3 = F.normalize(v2, p=1, dim=0)
    v4 = torch.sigmoid(v3)
    x2.reshape(-1)[::2].add_(1)
    v5 = x2[:, None, -2:, :-1]
    v6 = torch.zeros_like(v3) + v3
    v7 = F.batch_norm(x0.reshape(-1, 1, *x0.shape[-2:]), torch.zeros(x0.reshape(-1, 1, *x0.shape[-2:]).shape[1]), torch.ones(x0.reshape(-1, 1, *x0.shape[-2:]).shape[1]))
    return x2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 3, 4), 'float64', 'contiguous', 32), ((3, 4), 'int64', 'contiguous', 308), ((3, 3, 4), 'int64', 'contiguous', 550)],
]
