"""Wrong output strides (interp, eager, llvm): `torch.logical_or(v10 > 0, v2)` of a
bool [1, 4, 1, 3] permuted tensor and an int64 [1, 4, 3] one (`x0.flatten(2)`), whose
broadcast result eager's TensorIterator lays out (48, 4, 1, 16); refcomp's was
(48, 1, 4, 16), torch's meta kernel's (a Python reference that breaks size-1 ties
otherwise).  Integer and bool operands take the meta run (Note [IR-typed meta]), which
kept the meta kernel's strides.  Found by the final forward loop of session 12 (seed
1827, program 243, main b11cf5c; present since at least 46cce04).  Fixed: a pointwise
entry's meta-run result is restrided to TensorIterator's layout as the IR-typed path's is
(refcomp/tracer/torch_table.py; issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = 'stride'
SOURCE = '''
def f(x0):
    v1 = x0[...]
    v2 = x0.flatten(2)
    v5 = x0.max(-4)[0]
    v8 = torch.sort(v2, dim=2, stable=True).values
    v10 = x0.int()
    v11 = v1.argmax()
    v12 = torch.logical_or(v10 > 0, v2)
    v13 = v12.clone(memory_format=torch.preserve_format)
    return v13
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 4, 1, 3), 'int64', 'permuted', 408)],
    [((1, 4, 1, 3), 'int64', 'permuted', 409)],
    [((1, 4, 1, 3), 'int64', 'permuted', 410)],
]
