"""`x0.contiguous()` of a non-contiguous input, returned: the eager backend returned a tensor
with the input's strides (8, 1, 2) where eager gives row-major (8, 4, 1).  Found x16 by the
40-min soak of Nov 24 (/work/soak-11.txt).  Fixed: a fresh output (Note [Fresh outputs])
that eager lays out row-major is cloned row-major (refcomp/runtime.py,
`Entry.fresh_row_major`)."""
STATUS = "fixed"
BACKENDS = ["eager"]
SYMPTOM = "stride: out: strides (8, 1, 2), eager (8, 4, 1)"
SOURCE = '''
def f(x0):
    v1 = x0 * 2
    v2 = x0.contiguous()
    return v2
'''
INPUTS = [
    [((2, 2, 4), 'float32', 'transposed', 491)],
]
