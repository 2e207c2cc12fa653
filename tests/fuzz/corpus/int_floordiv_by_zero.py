"""Integer floor division by zero returns a value; eager raises RuntimeError."""
STATUS = "open"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "missed-raise: eager raised RuntimeError: ZeroDivisionError"
SOURCE = '''
def f(x0):
    return x0 // (x0 * 0)
'''
INPUTS = [
    [((3,), 'int32', 'contiguous', 0)],
]
