"""An in-place op on a returned view of an intermediate that nothing else holds
(`(x + 1).view(-1).mul_(2)`, `x.clone().view(-1, 1).mul_(2)`, `(x + 1).t().add_(1)`):
refcomp returned the view replayed on the intermediate's value from before the in-place
op, so the op was lost, on every backend: a WRONG VALUE.  Note [Views of outputs] rebuilt
the view from its base, and the base was not updated because no variable held it.  Found
by the thorough profile's per-backend hypothesis run (Nov 27, main 5436483), shrunk to
`v4 = x0.contiguous().view(-1, 1); v4.mul_(2); return v4` of a step-sliced input.
Fixed: a view mutated since its view op made it is not rebuilt (TensorVar.view_made,
refcomp/runtime.py `output_view_spec`; a view of such a view starts its chain there)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
SOURCE = '''
def f(x0):
    v4 = x0.contiguous().view(-1, 1)
    v4.mul_(2)
    w = (x0 + 1).t()
    w.add_(1)
    u = w.reshape(-1)
    return v4, w, u
'''
INPUTS = [
    [((2, 3), 'float32', 'step', 1)],
    [((2, 3), 'float32', 'contiguous', 2)],
    [((3, 3), 'float32', 'step', 3)],
]
