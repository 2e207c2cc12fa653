"""`x.std(0)` of a float16 input near 100 came back an ulp from eager's on every backend
(1.5751953 where eager's is 1.5761719, the exact 1.5757769 correctly rounded): the tracer took
the half-precision variance (rounded to half) and then its square root, where ATen takes
the square root of the float32 variance and rounds once.  `fmod` by it then multiplied
the ulp by the quotient (off by 0.076 on llvm, the other backends happening to round
`v2.abs() + 1` back).  Found by the thorough profile's llvm hypothesis test (Nov 27,
session 9, main 4164f2b; as hypothesis shrank it).  Fixed: the
std entry (refcomp/tracer/torch_ops.py) computes a half std in float32."""
STATUS = "fixed"
BACKENDS = ["llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0, x1, x2):
    v2 = x1.std(0, correction=1)
    v3 = x0 + x0
    v4 = OPAQUE(x0)
    v6 = torch.fmod(x1, v2.abs() + 1)
    v7 = F.conv2d(x0, torch.linspace(-1, 1.25, 2 * x0.shape[1] * 9, dtype=x0.dtype).reshape(2, x0.shape[1], 3, 3), padding=1)
    v8 = F.conv2d(x0, torch.linspace(-1, 1.25, 2 * x0.shape[1] * 9, dtype=x0.dtype).reshape(2, x0.shape[1], 3, 3), padding=1)
    v9 = F.conv2d(x0, torch.linspace(-1, 1.25, 2 * x0.shape[1] * 9, dtype=x0.dtype).reshape(2, x0.shape[1], 3, 3), padding=1)
    v10 = F.conv2d(x0, torch.linspace(-1, 1.25, 2 * x0.shape[1] * 9, dtype=x0.dtype).reshape(2, x0.shape[1], 3, 3), padding=1)
    return v6,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 1, 1, 1), 'float32', 'contiguous', 0), ((4, 4), 'float16', 'contiguous', 88, 'shifted'), ((1,), 'float32', 'contiguous', 0)],
]
