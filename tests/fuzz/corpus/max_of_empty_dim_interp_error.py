"""`max` over an empty dim, returned: eager raises IndexError, the interp backend its own
InterpreterError (argmax of an empty sequence)."""
STATUS = "open"
BACKENDS = ["interp"]
SYMPTOM = "wrong-exception: InterpreterError: argmax failed: attempt to get argmax of an empty sequence"
SOURCE = '''
def f(x0):
    return x0.max(-1)[1]
'''
INPUTS = [
    [((2, 0), 'float32', 'contiguous', 0)],
]
