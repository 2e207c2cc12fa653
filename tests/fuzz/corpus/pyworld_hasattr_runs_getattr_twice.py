"""`hasattr(obj, name)` where `type(obj).__getattr__` has a side effect: the compiled
call runs `__getattr__` twice per call (eager once), so the program's log and counters
differ.  Found by the Python-level fuzzer (tests/fuzz/pyworld.py, Nov 29, session 15: the
most frequent class of its first runs), shrunk by hand.  Fixed: refcomp/tracer/attributes.py `has_attr` traces the
read (Note [Reads that run user code]: an AttributeError it raises is False) and guards
presence without calling __getattr__; tests/frontend/test_reads_run_user_code.py."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "side-effect: LOG[Knobs.gone]"
PYTHON = True
GRAD_INPUTS = False
SOURCE = '''
LOG = []


class Knobs:
    def __getattr__(self, name):
        LOG.append("Knobs." + name)
        return len(name)


knobs = Knobs()


def f(x0):
    s = hasattr(knobs, 'gone')
    return x0 * 2, s
'''
BETWEEN = ['']
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 4), 'float32', 'contiguous', 0)],
    [((3, 4), 'float32', 'contiguous', 1)],
]
