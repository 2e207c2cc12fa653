"""A value mismatch on interp only: a bfloat16 `x.abs() ** x` of values near 100 is +inf
everywhere, and a dilated conv2d of it with weights all negative (first output channel)
or all positive (second) is -inf / +inf in float32 and about -1e213 / +1e214 in float64;
refcomp's interp gives those infinities, eager's bfloat16 kernel NaN.  So refcomp is the
one that agrees with float32 and float64 here; the oracle compares with eager's bfloat16
result.  Found by the forward soak of session 14 (seed 3301, program 10,171 of 10,807
per backend; eager and llvm pass: they call ATen's conv), present at the session's start
(14eae1b).  Kept open until the oracle judges such a case against float64 (issue 32's
note)."""
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
