"""An in-place op through `x.squeeze()` of a 0-d input writes x in eager (the squeeze is a
view); refcomp lost the writes on every backend (a wrong value: x0 * 1 was x0's old
value).  Same cause as squeeze_of_0d_input_is_a_view (the squeeze of a 0-d tensor typed
as a copy); written by hand beside it."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v1 = x0.squeeze()
    v1.mul_(2)
    v2 = x0.squeeze(-1)
    v2.add_(1)
    return x0 * 1
'''
INPUTS = [
    [((), 'float32', 'contiguous', 5)],
    [((), 'float64', 'contiguous', 6)],
]
