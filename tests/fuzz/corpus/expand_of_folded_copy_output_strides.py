"""`x0.flip(-1).unsqueeze(-1).expand(2)` of a 0-d input: eager returns a stride-0 view of
the flip's fresh result (strides (0,)); eager and llvm return strides (1,).  The flip of a
0-d tensor folds to x0 itself, so the expand becomes a view of the input, which the entry
must clone (eager's result shares nothing with x0: Note [Fresh outputs]) and a clone of an
expanded tensor is dense.  Values and aliasing are right; strides differ.  Found x4
(llvm) and x3 (eager) by the 55-min soak of Nov 24 (/tmp/soak1.log).  Fixed: such an
output is rebuilt as a view of its base's output on every backend (Note [Views of
outputs], spec/correctness.md), the base here being a hidden graph output."""
STATUS = "fixed"
BACKENDS = ["eager", "llvm"]
SYMPTOM = "stride: out: strides (1,), eager (0,) (shape (2,))"
SOURCE = '''
def f(x0):
    v2 = x0.flip(-1)
    v4 = v2.unsqueeze(-1).expand(*v2.shape, 2)
    return v4
'''
INPUTS = [
    [((), 'bool', 'contiguous', 128)],
]
