"""torch.round(x, decimals=2) is compiled as round(x): the keyword is dropped."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value: round to integers instead of to 2 decimals"
SOURCE = '''
def f(x0):
    return torch.round(x0, decimals=2)
'''
INPUTS = [
    [((4,), 'float32', 'contiguous', 0)],
]
