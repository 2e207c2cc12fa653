"""`squeeze(0)` of a 0-d tensor (eager: the tensor itself): the interp reference indexed
the shape of a 0-d array and raised (IndexError "squeeze failed: tuple index out of
range").  Found by a 150-s interp soak of Nov 24 (via a sum loop down to 0-d).  Fixed in
ir/ops/layout.py (_squeeze_ref)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: IndexError: index out of range in self (squeeze failed: tuple index out of range)"
SOURCE = '''
def f(x0):
    v6 = x0.squeeze(0)
    v7 = x0.squeeze(-1) * 2
    return v6 + 1, v7
'''
INPUTS = [
    [((), 'int64', 'contiguous', 126)],
    [((), 'float32', 'contiguous', 127)],
]
