"""`try`/`except IndexError`/`else` around a `.item()` break, then `next()` of a
generator and another `.item()` break: the compiled call raises "TypeError: 'function'
object cannot be interpreted as an integer" (a value stack out of step: a function where
an int was expected) on every backend; eager returns.  Found by the Python-level fuzzer
(tests/fuzz/pyworld.py, Nov 29, session 15), shrunk by statement deletion.  Fixed by
c03d7c1: a resume function's co_stacksize now covers every path, exception edges included
(Note [Stack size], refcomp/bytecode_gen.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "crash: TypeError: 'function' object cannot be interpreted as an integer"
PYTHON = True
GRAD_INPUTS = False
SOURCE = '''
LOG = []


def scaled(t, n):
    for i in range(n):
        LOG.append("scaled")
        yield t * (i + 1)


def f(x0):
    v2 = x0.clone()
    try:
        v2 = v2 + x0.sum().item()
        s3 = [1][2]
    except IndexError:
        s3 = -1
    else:
        s3 = 1
    v5 = next(scaled(v2, 4))
    z14 = v5.sum()
    v15 = x0
    s17 = v15.sum().item()
    return s3, z14, s17,
'''
BETWEEN = []
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((1, 4), 'float32', 'contiguous', 117)],
]
