"""A `KeyError` raised at a graph break inside `contextlib.suppress(KeyError)` and
suppressed there, then `len()` of an object whose class defines `__len__`, twice: the
interpreter dies (SIGSEGV) on the first call, on every backend (a smaller body gives a
TypeError from a guard's `check` or `manual_seed_all`'s callback called with the wrong
arguments: a corrupted value stack).  Found by the Python-level fuzzer
(tests/fuzz/pyworld.py, Nov 29, session 15), shrunk by hand; replayed in a child process.
Fixed by c03d7c1 (found in parallel by tests/fuzz/pygen.py): the resume function after
the handler had too small a co_stacksize (Note [Stack size], refcomp/bytecode_gen.py)."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "interpreter-crash: SIGSEGV"
PYTHON = True
GRAD_INPUTS = False
SOURCE = '''
TABLE = {"k": 2.0}


class Box:
    def __init__(self, t):
        self.t = t

    def __len__(self):
        return self.t.shape[0]


def f(x0):
    v2 = x0 + 1
    with contextlib.suppress(KeyError):
        v2 = x0 * TABLE['missing']
    v6 = x0 * len(Box(v2))
    v10 = v6 * len(Box(v6))
    return v2,
'''
BETWEEN = ['']
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 4), 'float32', 'contiguous', 0)],
    [((3, 4), 'float32', 'contiguous', 1)],
]
