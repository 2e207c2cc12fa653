"""The Python-level differential fuzzer (issue 32, point 3; spec/testing.md, "Python-level
programs").

The torch-level generator (tests/fuzz/gen.py) draws torch statements; this one draws the
Python around them, where the tracer's treatment of callables, attributes and exceptions
lives: properties and descriptors with side effects, `__getattr__` and
`__getattribute__`, dunder overrides, builtins applied to tensors, closures and cells,
exceptions raised and caught across graph breaks inside `with` blocks, generators,
classes defined in the frame, and module, global, default and attribute changes between
calls.

A program is a module: a fixed prelude (tests/fuzz/pyprelude.py, the classes and state
the statements use), then `def f(x, y, ...)` of drawn statements, and one mutation
statement per later call.  The oracle runs the module twice from scratch, once eager and
once with `f` compiled, calls `f` on equal fresh inputs, runs the same mutation after
each call, and compares after every call: the result (tensors by value, dtype and
shape; Python values by ==), the exception type if eager raised, and the prelude's
observable state (`STATE`: counters and logs that side effects write).
"""

from __future__ import annotations

import linecache
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

import refcomp

PRELUDE = (Path(__file__).parent / "pyprelude.py").read_text()


@dataclass
class PyProgram:
    body: list  # the statements of f, indented by 4
    mutations: list  # per call after the first: one statement run at module level
    n_inputs: int = 2
    seed: int = 0
    notes: dict = field(default_factory=dict)

    @property
    def source(self) -> str:
        params = ", ".join(f"x{i}" for i in range(self.n_inputs))
        body = "\n".join("    " + line for line in self.body)
        return f"def f({params}, k=K_DEFAULT):\n{body}\n"

    def module_source(self) -> str:
        return PRELUDE + "\n\n" + self.source

    def inputs(self, call: int) -> list:
        g = torch.Generator().manual_seed(self.seed * 1000 + call)
        return [torch.randn(4, generator=g) for _ in range(self.n_inputs)]

    def render(self) -> str:
        """The program as a standalone script (the prelude is imported, not repeated)."""
        muts = "\n".join(f"# after call {i + 1}: {m}" for i, m in enumerate(self.mutations))
        return f"# seed {self.seed}\n{self.source}{muts}\n"


_counter = [0]


def load(program: PyProgram, tag: str) -> dict:
    """A fresh namespace with the program's module run in it (registered with linecache,
    so break reasons quote its lines)."""
    _counter[0] += 1
    filename = f"<pyfuzz {tag} {_counter[0]}>"
    text = program.module_source()
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    ns = {"__name__": f"pyfuzz_{_counter[0]}"}
    exec(compile(text, filename, "exec"), ns)
    return ns


# --- statements ---------------------------------------------------------------------------
# Each template writes lines that read tensors from `live` and define a new tensor `v{n}`.
# `a`, `b`: two live tensor names; `n`: the new name; `r`: the program's random source.
def _property(r, a, b, n):
    obj = r.choice(["P", "PD"])
    return [f"{n} = {a} * {obj}.scale + {b}"]


def _descriptor(r, a, b, n):
    return [f"{n} = {a} + HD.d"]


def _getattr_fallback(r, a, b, n):
    return [f"{n} = {a} * GA.missing_{r.randint(0, 3)}"]


def _getattribute(r, a, b, n):
    return [f"{n} = {a} * CFG.hidden + CFG.offset"]


def _dunder_add(r, a, b, n):
    return [f"{n} = (Wrap({a}) + {b}).t"]


def _dunder_len_bool(r, a, b, n):
    return [f"{n} = {a} * len(SEQ) if SEQ else {b}"]


def _dunder_getitem(r, a, b, n):
    return [f"{n} = {a} + TABLE[{r.randint(0, 2)}]"]


def _dunder_call(r, a, b, n):
    return [f"{n} = SCALER({a}) - {b}"]


def _builtin_max(r, a, b, n):
    form = r.choice([
        f"max({a}.sum(), {b}.sum())",
        f"min([{a}.sum(), {b}.sum()], key=float)",
        f"max(1.0, 2.5) * {a}",
        f"max(({a}, {b}), key=lambda t: t.shape[0])",
    ])
    return [f"{n} = {a} + {form}"]


def _builtin_misc(r, a, b, n):
    form = r.choice([
        f"sum([{a}, {b}])", f"abs({a})", f"{a} * len({a})",
        f"{a} * float(isinstance({b}, torch.Tensor))",
        f"{a} + sum(sorted([3, 1, 2]))",
        f"{a} * float(any([False, {b}.shape[0] > 2]))",
    ])
    return [f"{n} = {form}"]


def _closure(r, a, b, n):
    return [
        "count = [0]",
        "def bump(v):",
        "    count[0] += 1",
        "    return v * count[0]",
        f"{n} = bump({a}) + bump({b})",
    ]


def _nonlocal_cell(r, a, b, n):
    return [
        "def outer(v):",
        "    step = 1.0",
        "    def inner():",
        "        nonlocal step",
        "        step += 1.0",
        "        return step",
        "    inner()",
        "    return v * inner()",
        f"{n} = outer({a})",
    ]


def _try_break(r, a, b, n):
    inner = r.choice([f"OPAQUE({a}) * 2", f"{a} * D['missing']", f"{a} / 0.5"])
    handler = r.choice(["KeyError", "Exception", "(KeyError, ValueError)"])
    return [
        "try:",
        f"    {n} = {inner}",
        f"except {handler}:",
        f"    {n} = {b} + 1",
    ]


def _with_suppress(r, a, b, n):
    return [
        f"{n} = {b}",
        "with contextlib.suppress(KeyError):",
        f"    {n} = {a} * D['missing']",
    ]


def _raise_from(r, a, b, n):
    return [
        "try:",
        "    try:",
        "        raise KeyError('k')",
        "    except KeyError as e:",
        "        raise ValueError('v') from e",
        "except ValueError:",
        f"    {n} = {a} - {b}",
    ]


def _no_grad_try(r, a, b, n):
    return [
        "with torch.no_grad():",
        "    try:",
        f"        {n} = OPAQUE({a}) + {b}",
        "    except RuntimeError:",
        f"        {n} = {a}",
    ]


def _generator(r, a, b, n):
    return [
        "def gen(v):",
        "    yield v",
        "    yield v * 2",
        f"{n} = sum(gen({a})) + {b}",
    ]


def _genexpr(r, a, b, n):
    return [f"{n} = sum(t * i for i, t in enumerate(({a}, {b})))"]


def _local_class(r, a, b, n):
    return [
        "class Local:",
        "    def __init__(self, s):",
        "        self.s = s",
        "    def apply(self, v):",
        "        return v * self.s",
        f"{n} = Local({r.choice(['2.0', '0.5', 'k'])}).apply({a}) + {b}",
    ]


def _global_read(r, a, b, n):
    return [f"{n} = {a} * G_SCALE + {b} * CFG_OBJ.bias"]


def _global_write(r, a, b, n):
    return ["G_CALLS += 1", f"{n} = {a} + {b}"]  # (`global G_CALLS` heads the body)


def _log(r, a, b, n):
    return [f"STATE['log'].append({r.choice(['1', repr('x'), 'len(STATE)'])})",
            f"{n} = {a} * {b}"]


def _default(r, a, b, n):
    return [f"{n} = {a} * k + {b}"]


def _module_attr(r, a, b, n):
    form = r.choice(["import pyfuzz_mod\n{n} = {a} * pyfuzz_mod.K",
                     "from pyfuzz_mod import K\n{n} = {a} + K"])
    return form.format(n=n, a=a).splitlines()


def _tensor_attr(r, a, b, n):
    return [f"{n} = {a} * getattr(TAGGED, 'scale', 1.0)"]


def _grown_loop(r, a, b, n):
    """A loop over a list its body grows (every item is visited), or over a dict whose
    size it changes (eager's RuntimeError); either around a break or not."""
    brk = r.choice(["", " * (1.0 + 0.0 * float({a}.sum()))"]).format(a=a)
    if r.random() < 0.7:
        loop = r.choice(["for t in items:", "for _, t in enumerate(items):"])
        return [f"items = [{a}, {b}]",
                f"{n} = {a} * 0",
                loop,
                f"    if len(items) < {r.choice([3, 4])}:",
                "        items.append(t + 1)",
                f"    {n} = {n} + t{brk}"]
    return [f"table = {{'p': {a}, 'q': {b}}}",
            f"{n} = {a} * 0",
            r.choice(["for key in table:", "for key, _ in table.items():"]),
            f"    {n} = {n} + table[key]{brk}",
            f"    if key == {r.choice(['p', 'q'])!r}:",
            "        table['r'] = 1"]


def _inplace_view(r, a, b, n):
    return [f"{n} = {a}.clone()", f"{n}.view(-1).mul_(2)"]


TEMPLATES = [_property, _descriptor, _getattr_fallback, _getattribute, _dunder_add,
             _dunder_len_bool, _dunder_getitem, _dunder_call, _builtin_max, _builtin_misc,
             _closure, _nonlocal_cell, _try_break, _with_suppress, _raise_from, _no_grad_try,
             _generator, _genexpr, _local_class, _global_read, _global_write, _log,
             _default, _module_attr, _tensor_attr, _inplace_view, _grown_loop]

# Between calls: one of these runs at module level, in both namespaces alike.
MUTATIONS = [
    "P.k = P.k + 1.0",
    "CFG.d = CFG.d + 1.0",
    "G_SCALE = G_SCALE * 2.0",
    "CFG_OBJ.bias = -CFG_OBJ.bias",
    "f.__defaults__ = (f.__defaults__[0] + 1.0,)",
    "pyfuzz_mod.K = pyfuzz_mod.K + 1.0",
    "TAGGED.scale = 3.0",
    "SEQ.append(1)",
    "SEQ.clear()",
    "TABLE.values[0] = TABLE.values[0] + 1.0",
    "pass",
]


def generate(seed: int, max_statements: int = 6, calls: int = 3) -> PyProgram:
    r = random.Random(seed)
    n_inputs = r.choice([1, 2])
    live = [f"x{i}" for i in range(n_inputs)]
    body = []
    for i in range(r.randint(1, max_statements)):
        template = r.choice(TEMPLATES)
        a, b = r.choice(live), r.choice(live)
        name = f"v{i}"
        body += template(r, a, b, name)
        live.append(name)
    outs = live[n_inputs:][-2:] or live[:1]
    body.append(f"return ({', '.join(outs)},)")
    if any(line.startswith("G_CALLS") for line in body):
        body.insert(0, "global G_CALLS")
    mutations = [r.choice(MUTATIONS) for _ in range(calls - 1)]
    return PyProgram(body, mutations, n_inputs, seed)


# --- the oracle ---------------------------------------------------------------------------
def _run(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # eager's exception is part of what the program does
        return ("raise", type(e), str(e))


def _same(got, want) -> str | None:
    """None when `got` is what eager returned, else what differs."""
    if got[0] != want[0]:
        return f"compiled {got[0]}s ({got[1:]}) where eager {want[0]}s ({want[1:]})"
    if want[0] == "raise":
        return None if got[1] is want[1] else f"raises {got[1].__name__}, eager" \
                                              f" {want[1].__name__}"
    return _same_value(got[1], want[1], "result")


def _same_value(got, want, where) -> str | None:
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where}: {type(got).__name__} where eager returns a tensor"
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"{where}: {got.dtype}{list(got.shape)} vs eager {want.dtype}{list(want.shape)}"
        try:
            torch.testing.assert_close(got, want, equal_nan=True)
        except AssertionError as e:
            return f"{where}: values differ: {str(e).splitlines()[0]}"
        return None
    if isinstance(want, (tuple, list)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"{where}: {type(got).__name__} of {len(got)} vs {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            problem = _same_value(g, w, f"{where}[{i}]")
            if problem:
                return problem
        return None
    return None if got == want else f"{where}: {got!r} vs eager {want!r}"


def _state(ns) -> dict:
    return {"STATE": repr(ns["STATE"]), "G_CALLS": ns["G_CALLS"]}


def check_program(program: PyProgram, backend: str) -> str | None:
    """None when every call of the compiled program equals eager's, else the difference
    (a crash of refcomp is reported the same way: an exception eager did not raise)."""
    eager_ns, compiled_ns = load(program, "eager"), load(program, "compiled")
    compiled = refcomp.compile(compiled_ns["f"], backend=backend)
    for call in range(len(program.mutations) + 1):
        want = _run(eager_ns["f"], program.inputs(call))
        got = _run(compiled, program.inputs(call))
        problem = _same(got, want)
        if problem is None and _state(compiled_ns) != _state(eager_ns):
            problem = f"state after the call: {_state(compiled_ns)} vs eager {_state(eager_ns)}"
        if problem is not None:
            return f"call {call}: {problem}"
        if call < len(program.mutations):
            for ns in (eager_ns, compiled_ns):
                exec(program.mutations[call], ns)
    return None
