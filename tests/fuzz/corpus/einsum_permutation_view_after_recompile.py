"""`torch.einsum('ij->ji', v)` of a view `v` of an input, returned, with dynamic sizes:
eager's einsum of a pure permutation returns a view of the input; refcomp returned a copy
(an opaque view op whose tensor is not its first argument could not be replayed).  Found
x4 by a 150-s interp soak of Nov 24 (on every backend with dynamic sizes).  Fixed: view
steps mark the viewed tensor's place in any argument (VIEW_BASE, refcomp/tracer/values.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "alias: out[0] shares storage with input: [], eager [0]"
SOURCE = '''
def f(x0):
    v1 = x0.split([1, x0.shape[0] - 1], 0)[1]
    v2 = torch.einsum('ij->ji', v1)
    return v2, v2, v1,
'''
INPUTS = [
    [((2, 1), 'float16', 'contiguous', 200)],
    [((3, 2), 'float16', 'contiguous', 201)],
    [((4, 3), 'float16', 'transposed', 202)],
]
