"""Multi-output ops return plain tuples inside the trace: `.values` raises AttributeError
where eager returns torch.return_types.max."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: AttributeError: 'tuple' object has no attribute 'values'"
SOURCE = '''
def f(x0):
    return x0.max(1).values
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
