"""An out-of-bounds index tensor: eager raises IndexError, the interp backend raises its own
InterpreterError."""
STATUS = "fixed"
BACKENDS = ["interp"]
SYMPTOM = "wrong-exception: InterpreterError: index_select failed: index 4 is out of bounds"
SOURCE = '''
def f(x0, x1):
    return x0[x1]
'''
INPUTS = [
    [((3, 3), 'float32', 'contiguous', 0), ((2,), 'int32', 'contiguous', 0)],
]
