"""`True - x` (a bool Python scalar in a subtraction): eager raises RuntimeError
("Subtraction, the `-` operator, with a bool tensor is not supported"); refcomp computes a
value, even when the result is dead."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "missed-raise: eager raised RuntimeError: Subtraction, the `-` operator, with a bool"
SOURCE = '''
def f(x0):
    v1 = True - x0
    return x0,
'''
INPUTS = [
    [((), 'float32', 'contiguous', 0)],
]
