"""A wrong gradient (eager backend; gradient mode): `v1 = x0.min()`, `v4 = v1.std()` (a
single element: NaN, and a NaN gradient).  Eager's min() backward
(evenly_distribute_backward) fills the share into the minimum's position only, so every
other element's gradient is exactly 0; the eager backend ran the IR's `amin` as
torch.amin, whose backward multiplies the share by the mask (NaN * 0 = NaN everywhere).
Found by the session-12 gradient soak (seed 2116, program 15,954, main f09c5ba).  Fixed:
the eager backend runs a full extremum without dims as torch.min/max, and the VJP of
amax/amin over given dims multiplies by the mask as ATen's amax does (a NaN gradient
reaches every element there; tests/training/test_vjp_edges.py) (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-value"
SOURCE = '''
def f(x0):
    v1 = x0.min()
    v2 = torch.cat((x0, x0), -2)
    v3 = v1 if v1.numel() > 3 else -v1
    v4 = v1.std()
    return v4, v4,
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 4, 2), 'float64', 'contiguous', 137)],
]
