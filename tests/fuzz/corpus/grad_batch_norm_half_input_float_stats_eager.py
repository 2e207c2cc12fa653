"""A crash where eager runs (interp, eager, llvm; gradient mode): `F.batch_norm` of a
bfloat16 tensor with float32 running statistics and no weight, in a graph with another
output that requires grad.  Eager's batch_norm takes half input with float statistics
(ATen's mixed-type path).  A graph that records autograd keeps its composites whole on
the eager backend since f2fa174 (Note [Composites under autograd]), and that backend's
batch_norm passed the tracer's bfloat16 weight and bias beside the float32 statistics
to F.batch_norm, which raised "expected scalar type BFloat16 but found Float".  Found by
the session-11 gradient soak (seed 2111, program 6,998, on f2fa174).  Fixed: the eager
backend's batch_norm gives ATen's mixed-type path float32 parameters (issue 11)."""
STATUS = "fixed"
GRAD = True
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "grad-crash: RuntimeError: expected scalar type BFloat16 but found Float"
SOURCE = '''
def f(x0, x1):
    v1 = F.batch_norm(x0.reshape(-1, 1, *x0.shape[-2:]), torch.zeros(1), torch.ones(1))
    v2 = x1.cumprod(dim=0)
    return v1, v2
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((4, 2), 'bfloat16', 'contiguous', 363), ((2,), 'float32', 'contiguous', 394)],
    [((5, 5), 'float16', 'contiguous', 365), ((5,), 'float32', 'contiguous', 396)],
]
