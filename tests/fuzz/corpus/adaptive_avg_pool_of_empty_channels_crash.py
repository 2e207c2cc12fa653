"""A crash where eager runs (eager, llvm): `F.adaptive_avg_pool2d(v4, (1, None))` where the
second call's v4 has no channels ((3, 0, 1, 2), after an automatic-dynamic recompile for
the new sizes).  refcomp's call reaches ATen's adaptive_avg_pool2d check, "Expected 3D or
4D (batch mode) tensor with optional 0 dim batch size for input", and raises; eager
returns a result.  Found by the final thorough loop of session 10 (Nov 27, main 46e0a55,
program 18,539 of 20,000; interp passes).  refcomp traces an adaptive pool whose output
size divides the input as avg_pool2d, and ATen's avg_pool2d refuses an input with no
channels where adaptive_avg_pool2d does not.  Fixed: that case breaks (RB013) and eager
runs it (refcomp/tracer/torch_ops.py) (issue 11)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: RuntimeError: Expected D or D (batch mode) tensor with optional  dim batch size for input,"
SOURCE = '''
def f(x0, x1, x2):
    v1 = torch.full((2,), 2.0)
    v3 = x1.view_as(x1)
    v4 = x0 * v1
    v5 = v3
    v6 = x1.bool()
    s9 = int(v5.sum())
    v10 = F.adaptive_avg_pool2d(v4, (1, None))
    return v10
'''
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((3, 2, 1, 1), 'bool', 'contiguous', 49), ((4,), 'bool', 'contiguous', 15), ((3, 2, 4, 1), 'bool', 'expanded', 367)],
    [((3, 0, 1, 1), 'bool', 'contiguous', 50), ((4,), 'bool', 'contiguous', 16), ((3, 0, 4, 1), 'bool', 'expanded', 368)],
]
