"""A returned `x.narrow(0, 1, x.shape[0] - 1)` of an input: eager returns a view of x, the
interp backend a copy (eager and llvm hand back the backend's own view).  `narrow` was not
among the view ops that keep `view_root`.  Found by a 150-s soak of Nov 24 once returned
views of inputs were compared strictly.  Fixed: narrow is a view op (refcomp/tracer/
torch_table.py VIEW_OPS), rebuilt from the caller's tensor, replayed with dynamic sizes."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with input: [], eager [0]"
SOURCE = '''
def f(x0):
    v1 = x0.narrow(0, 1, x0.shape[0] - 1)
    v2 = x0.narrow(1, 0, 2)
    return v1, v2
'''
INPUTS = [
    [((4, 3), 'float32', 'contiguous', 0)],
    [((5, 3), 'float32', 'transposed', 1)],
    [((2, 3), 'float32', 'step', 2)],
]
