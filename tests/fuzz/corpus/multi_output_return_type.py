"""A returned multi-output result is a plain tuple, not torch.return_types.max."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "structure: returned builtins.tuple, eager torch.return_types.max"
SOURCE = '''
def f(x0):
    return x0.max(1)
'''
INPUTS = [
    [((2, 3), 'float32', 'contiguous', 0)],
]
