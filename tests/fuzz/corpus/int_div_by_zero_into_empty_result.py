"""Integer fmod / floor division / remainder by a tensor holding zero, where the result has
no element (an empty x broadcast against a 0-d divisor): eager computes no element and
raises nothing; refcomp's runtime check (Note [Runtime checks]) raised
RuntimeError("ZeroDivisionError") on every backend.  Found by the thorough profile's
per-backend run (Nov 27, main 5436483) as `torch.fmod(x0, x1)` of an int64 [0, 2, 2, 3]
by a 0-d zero after a [1, 2, 2, 3] call.  Fixed: the check looks at the divisor broadcast
to the result (refcomp/tracer/torch_ops.py, `_check_nonzero_divisor`)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: RuntimeError: ZeroDivisionError"
SOURCE = '''
def f(x0, x1):
    v1 = x1.unsqueeze(0)
    v2 = OPAQUE(x1)
    v4 = torch.fmod(x0, x1)
    v5 = x0 // x1
    return [x0, x0, v2, v4 + v5]
'''
INPUTS = [
    [((1, 2, 2, 3), 'int64', 'step', 256), ((), 'int64', 'contiguous', 396)],
    [((0, 2, 2, 3), 'int64', 'step', 257), ((), 'int64', 'contiguous', 397)],
]
