"""`v3` (cummax indices, an intermediate) returned beside `v3.view_as(v3)` and `v3`, after
an in-place op on the input: eager's three outputs share one storage; on eager and llvm
the view_as output comes back as a separate tensor (out[0] shares storage with out[2]
only).  Found x4 per backend by the soak of Nov 24 11:29 (/tmp/soak2.log).  Fixed: a
returned view of an intermediate is rebuilt from its base's output on every backend
(Note [Views of outputs], spec/correctness.md)."""
STATUS = "fixed"
BACKENDS = ["eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with: ['out[2]'], eager ['out[1]', 'out[2]']"
SOURCE = '''
def f(x0):
    v3 = x0.cummax(dim=-1)[1]
    x0.masked_fill_(x0 < 0, 3)
    v5 = v3.view_as(v3)
    return v3, v5, v3,
'''
INPUTS = [
    [((1,), 'float32', 'contiguous', 622)],
    [((1,), 'float32', 'contiguous', 623)],
    [((1,), 'float32', 'contiguous', 624)],
]
