"""A data descriptor whose `__get__` does not return what `__set__` stored
(`obj.k = 0.25` stores 0.25, `obj.k` reads 0.5): set then read in one compiled frame, the
read gives the value set (0.25), not `__get__`'s, and `__get__`'s side effect is missing.
Wrong values on every backend.  Found by the Python-level fuzzer (tests/fuzz/pyworld.py,
Nov 29, session 15), shrunk by hand.  Fixed: refcomp/tracer/attributes.py `traced_store`
traces a store that runs the class's code (a Python __setattr__, a property's setter, a
data descriptor's __set__); tests/frontend/test_reads_run_user_code.py."""
STATUS = "fixed"
BACKENDS = ["interp", "eager", "llvm"]
SYMPTOM = "value"
PYTHON = True
GRAD_INPUTS = False
SOURCE = '''
LOG = []


class Scaled:
    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        LOG.append("Scaled.get")
        return getattr(obj, self.name) * 2

    def __set__(self, obj, v):
        LOG.append("Scaled.set")
        setattr(obj, self.name, v)


class Knobs:
    k = Scaled()


knobs = Knobs()


def f(x0):
    knobs.k = 0.25
    return x0 * knobs.k,
'''
BETWEEN = []
INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])
    [((2, 4), 'float32', 'contiguous', 0)],
]
