"""`masked_fill` of a channels_last bfloat16 input of batch 1, cast to float32 and cloned:
eager's result is row-major (strides (48, 12, 4, 1) for shape (1, 4, 3, 4)); every backend
returns it channels_last ((48, 1, 16, 4)).  Values are equal.  Found x4 on interp and llvm
by the soak of Nov 24 (`--seed 1124`, main 12bf5a9) at program 5015; eager fails the
replay too.  Open."""
STATUS = "open"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "stride"
SOURCE = '''
def f(x0):
    v1 = x0.masked_fill(x0 > 0, 2.0)
    v2 = v1.to(torch.float32)
    v3 = v2.clone()
    return v3, v3,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed)
    [((1, 4, 3, 4), 'bfloat16', 'channels_last', 391)],
    [((1, 4, 3, 4), 'bfloat16', 'channels_last', 392)],
]
