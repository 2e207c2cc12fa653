"""A wrong requires_grad flag (llvm): `v3 = x0.detach().clone()` returned beside `x0`
itself (twice), x0 a 0-d float64 leaf requiring grad.  Eager's v3 does not require grad;
refcomp's llvm output does.  The IR folds the detach and the clone, so v3 is the graph
input x0's value at a second output.  Found by the thorough gradient profile's
1,000-program loop (REFCOMP_HYPOTHESIS=thorough, llvm program 705, Nov 27); present
before this session's gradient work (reproduces on 0525e13).  Fixed: the runtime
copies an output that is a graph input's value (Entry.fresh) with clone(), which records
autograd; such a copy is now detached where eager's output does not require grad, on every
backend (it was only on differentiable ones) (refcomp/runtime.py) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-flag"
SOURCE = '''
def f(x0, x1):
    v2 = x0.detach()
    v3 = v2.clone(memory_format=torch.preserve_format)
    v5 = x0.ceil()
    return v3, x0, x0,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((), 'float64', 'contiguous', 930), ((), 'float64', 'contiguous', 378)],
]
