"""A value mismatch on interp only: a bfloat16 `x.abs() ** x` (shifted inputs: large
values) fed to conv2d; the compiled interp result is +-inf where eager's is another value
(NaN differences).  Found by the forward soak of session 14 (seed 3301, program 10,171
of 10,807 per backend; eager and llvm pass).  Kept open: not yet triaged (issue 32's
note lists it)."""
STATUS = "open"
BACKENDS = ["interp"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = x0.abs() ** x0
    print(end='')
    v2 = x0 + 1
    v4 = x0.expand_as(v1) + 0
    v5 = torch.isnan(x0.sqrt())
    v6 = F.conv2d(v1.reshape(-1, 1, *v1.shape[-2:]), torch.linspace(-1, 1.25, 2 * v1.reshape(-1, 1, *v1.shape[-2:]).shape[1] * 4, dtype=v1.reshape(-1, 1, *v1.shape[-2:]).dtype).reshape(2, v1.reshape(-1, 1, *v1.shape[-2:]).shape[1], 2, 2), torch.arange(2, dtype=v1.reshape(-1, 1, *v1.shape[-2:]).dtype), dilation=(1, 2))
    v7 = v6.T if v6.dim() == 2 else v6
    v8 = v4 * 1
    return v5, v7, v8,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 4), 'bfloat16', 'contiguous', 72, 'shifted')],
]
