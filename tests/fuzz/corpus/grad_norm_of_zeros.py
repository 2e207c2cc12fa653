"""A wrong gradient (interp, eager, llvm; gradient mode): the 2-norm of a tensor whose
elements are all 0 (here a scalar that dropout zeroed) has gradient 0 in eager, whose
norm_backward computes `self * (grad / norm).masked_fill_(norm == 0, 0)`; refcomp's
decomposition `sqrt(sum(x * x))` gave NaN (sqrt's VJP is inf at 0, times 2x = 0), also
for other p and for F.normalize.  Found by the thorough gradient loop (Nov 27, session 12,
main 2565850, program 102).  Fixed: under grad the root's gradient is masked where the
norm is 0 (`_root_masked_at_zero`, refcomp/tracer/torch_ops.py, shared with std; issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0, x1):
    v1 = x1 * 0
    v4 = v1.norm()
    v5 = torch.linalg.vector_norm(x0 * 0, 3, dim=-1)
    v6 = F.normalize(x0 * 0, dim=0)
    return v4, v5, v6
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 1), 'float32', 'contiguous', 472, 'shifted'), ((), 'float32', 'contiguous', 133)],
    [((4, 3), 'float64', 'contiguous', 473), ((2,), 'float32', 'contiguous', 134)],
]
