"""Integer remainder (and floor division) by zero returns a value; eager raises
RuntimeError: ZeroDivisionError."""
STATUS = "fixed"  # fixed on main by the "fixes" engineer (issue 11); replayed on every backend
BACKENDS = ["interp", "llvm"]
SYMPTOM = "missed-raise: eager raised RuntimeError: ZeroDivisionError"
SOURCE = '''
def f(x0):
    return x0 % x0.clamp(0, 0)
'''
INPUTS = [
    [((3,), 'int64', 'contiguous', 0)],
]
