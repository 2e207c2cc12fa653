"""var over dims (0, 1) of a float32 [1024, 1024, 4] tensor is inaccurate (issue 11: 4.7e-4
relative, tolerance 1e-4): the reduction must be as accurate as ATen's."""
STATUS = "fixed"
BACKENDS = ["interp", "llvm"]
SYMPTOM = "value: relative error above 1e-4"
SOURCE = '''
def f(x0):
    return x0.var(dim=(0, 1))
'''
INPUTS = [
    [((1024, 1024, 4), 'float32', 'contiguous', 0)],
]
