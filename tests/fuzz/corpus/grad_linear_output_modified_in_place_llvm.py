"""A crash where eager runs (llvm; gradient mode): `v4 = F.linear(x0, w)` of an input
requiring grad, then `v4.add_(x0)`, beside three equal convolutions: "Output 3 of
CompiledFunction is a view and is being modified inplace".  Caused by dd22b79, which
counted extern results as fresh in the aliasing analysis, so the Function returned a
view of its matmul's buffer; found by the thorough gradient profile on dd22b79 and
fixed by reverting that rule (refcomp/aliasing.py) (issue 11)."""
GRAD = True
STATUS = "fixed"
BACKENDS = ["llvm"]
SYMPTOM = 'crash: RuntimeError: Output  of CompiledFunction is a view and is being modified inplace. This vi'
SOURCE = '''
def f(x0):
    v1 = F.conv2d(x0.reshape(-1, 1, *x0.shape[-2:]), torch.linspace(-1, 1.25, 2 * x0.reshape(-1, 1, *x0.shape[-2:]).shape[1] * 9, dtype=x0.reshape(-1, 1, *x0.shape[-2:]).dtype).reshape(2, x0.reshape(-1, 1, *x0.shape[-2:]).shape[1], 3, 3), padding=1)
    v2 = F.conv2d(x0.reshape(-1, 1, *x0.shape[-2:]), torch.linspace(-1, 1.25, 2 * x0.reshape(-1, 1, *x0.shape[-2:]).shape[1] * 9, dtype=x0.reshape(-1, 1, *x0.shape[-2:]).dtype).reshape(2, x0.reshape(-1, 1, *x0.shape[-2:]).shape[1], 3, 3), padding=1)
    v3 = F.conv2d(x0.reshape(-1, 1, *x0.shape[-2:]), torch.linspace(-1, 1.25, 2 * x0.reshape(-1, 1, *x0.shape[-2:]).shape[1] * 9, dtype=x0.reshape(-1, 1, *x0.shape[-2:]).dtype).reshape(2, x0.reshape(-1, 1, *x0.shape[-2:]).shape[1], 3, 3), padding=1)
    v4 = F.linear(x0, torch.linspace(-1, 1.25, 3 * x0.shape[-1], dtype=x0.dtype).reshape(3, -1))
    v4.add_(x0)
    return x0,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 1, 1), 'float32', 'contiguous', 0)],
]
