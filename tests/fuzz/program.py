"""A fuzz program: real Python source of `def f(...)` over the torch API, and the inputs of
each call (one list of input specs per call; the compiled function is called once per list,
in order, so later calls exercise guards, recompiles and dynamic sizes).

The same text form is the corpus format (tests/fuzz/corpus/*.py) and what a failing run
prints, so a shrunk failure can be pasted into the corpus as it is.
"""

import linecache
from dataclasses import dataclass, field

import torch

import refcomp
from tests.fuzz.inputs import make


@refcomp.disable
def OPAQUE(t):
    """A call refcomp must not trace (a forced graph break); returns its argument itself."""
    return t


def namespace():
    """The globals a program runs with (eager and compiled alike)."""
    return {"torch": torch, "F": torch.nn.functional, "OPAQUE": OPAQUE}


# Marks a line the explain() oracle holds to no graph break (tests/fuzz/runner.py
# capture_failure; written by tests/fuzz/gen.py's inplace_view).
MUST_CAPTURE = "  # must capture"


@dataclass
class Program:
    source: str                 # "def f(x0, ...):\n    ...\n"
    # per call: [(shape tuple, dtype name, layout, seed[, values]), ...] (tests/fuzz/inputs.py)
    calls: list
    notes: dict = field(default_factory=dict)

    def args(self, k):
        """Fresh input tensors of call k (same values and strides every time)."""
        return [make(*spec) for spec in self.calls[k]]

    def function(self, tag="fuzz program"):
        """Compile the source (registered with linecache, so tracebacks and refcomp's break
        reasons quote its lines) and return `f`."""
        _counter[0] += 1
        filename = f"<{tag} {_counter[0]}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True),
                                     filename)
        ns = namespace()
        exec(compile(self.source, filename, "exec"), ns)
        return ns["f"]

    def render(self, **header) -> str:
        """The program as a corpus file body (ready to paste into tests/fuzz/corpus/)."""
        lines = [f"{k.upper()} = {v!r}" for k, v in header.items()]
        lines.append("SOURCE = '''\n" + self.source + "'''")
        lines.append("INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])")
        for call in self.calls:
            lines.append(f"    {[tuple(spec) for spec in call]!r},")
        lines.append("]")
        return "\n".join(lines) + "\n"

    def snippet(self, backend) -> str:
        """A standalone script reproducing the program on `backend` (run from the repo root);
        inputs are built twice (eager and compiled get equal, separate tensors)."""
        calls = ",\n    ".join(
            "lambda: [" + ", ".join(f"make{tuple(spec)!r}" for spec in call) + "]"
            for call in self.calls)
        return ("import torch, refcomp\nimport torch.nn.functional as F\n"
                "from tests.fuzz.inputs import make\nfrom tests.fuzz.program import OPAQUE\n\n"
                + self.source
                + f"\ncf = refcomp.compile(f, backend={backend!r})\n"
                  f"for args in [\n    {calls}]:\n"
                  "    print('eager:   ', f(*args()))\n"
                  "    print('compiled:', cf(*args()))\n")


_counter = [0]


def from_module(mod) -> Program:
    """A corpus module (SOURCE, INPUTS) as a Program."""
    return Program(mod.SOURCE.lstrip("\n"), [[tuple(s) for s in call] for call in mod.INPUTS])
