"""`v1 = x2.view(x2.shape); v1.uniform_(); return v1.chunk(2, 0)[-1]`: the result is a
view of the input x2 in eager; compiled it was a fresh tensor (no storage shared with the
input) on every backend.  Found by the torch-level thorough profile (session 19, main
9d36fea, program 5,368)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias"
SOURCE = '''
def f(x0, x1, x2):
    v1 = x2.view(x2.shape)
    v1.uniform_()
    v2 = v1.chunk(2, 0)[-1]
    v3 = torch.hstack([v2, v2])
    w4 = v1.clone(memory_format=torch.contiguous_format)
    w4.unflatten(0, (1, -1))[0] += 1  # must capture
    return v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 1, 2), 'bfloat16', 'permuted', 444), ((2,), 'bfloat16', 'expanded', 512), ((2,), 'bfloat16', 'contiguous', 297)],
    [((1, 1, 2), 'bfloat16', 'permuted', 445), ((2,), 'bfloat16', 'expanded', 513), ((2,), 'bfloat16', 'contiguous', 298)],
]
