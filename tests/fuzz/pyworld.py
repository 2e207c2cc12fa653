"""The Python-level fuzzer (spec/testing.md, "Python-level programs"): programs that mix
torch statements with the Python a model's code uses around them, compared with eager in
everything Python defines.

A program is a module: a prelude (classes with properties, descriptors and dunder
overrides, a closure factory, a generator, globals, a module object `cfg`, a list `LOG`
that every user-level side effect appends to) and `def f(x0, x1, ...)`, whose statements
use what the prelude defines plus what needs no prelude (builtins applied to tensors,
closures over `nonlocal` cells, exceptions raised and caught across graph breaks inside
`with` blocks, generators and classes defined in the frame).  The compiled function is
called once per input list; between two calls the program may change its world: rebind a
global, set a module attribute, mutate the function's `__defaults__`/`__kwdefaults__`,
change the state behind a property.

Eager and compiled each run their own copy of the module (the prelude executed twice),
on equal, separate inputs.  `compare` checks per call:
- exceptions: the same type (then the program stops), as tests/fuzz/runner.py;
- the result: structure, values, dtypes, strides, aliasing with the inputs (the torch-level
  runner's `_compare_results`), which output tensors require grad; identity with an
  operand is returned as a bool (`m = max(a, b); i = m is a`), so it is compared as a value;
- the world after the call: `LOG` (the same events, in the same order: a property read
  twice by a guard shows here), every global of the module (numbers, lists, dicts,
  tensors, objects' attributes, the module object's attributes, functions' defaults and
  closure cells), and the grad mode;
- the inputs after the call.

Programs are drawn, not executed while drawn: the statements keep every tensor of `T` of
the inputs' shape (n, 4), `Z` are 0-dim tensors, `S` Python values, so most programs run;
a program that raises is still a test (the same exception type).

`programs()` is the hypothesis strategy; `reference(p)`/`compare(p, backend, ref)` the
oracle the soak uses (`python -m tests.fuzz.soak --python`); `check(p, backend)` raises
with a paste-ready report.  Corpus files of this generator say `PYTHON = True` and carry
`BETWEEN` (per call after the first, the code run in the module before it).
"""

import contextlib
import dataclasses
import functools
import linecache
import operator
import sys
import types
import warnings
from dataclasses import dataclass, field

import numpy
import torch
from hypothesis import strategies as st

import refcomp
from tests.fuzz.inputs import make
from tests.fuzz.program import OPAQUE
from tests.fuzz.runner import (
    TOLERANCE,
    Outcome,
    _compare_inputs,
    _compare_results,
    _leaves,
    _seed,
    program_tolerance,
)

# feature -> corpus file(s) whose open bug excludes it (as gen.KNOWN_OPEN): a FEATURES
# name, or "template:" + a template's text (the template is not drawn), or "check:..."
# (a comparison relaxed).  Excluded on the backends the file lists, while it is open.
KNOWN_OPEN: dict = {}

FAIL_KINDS = ("crash", "missed-raise", "wrong-exception", "structure", "dtype", "shape",
              "value", "stride", "alias", "input", "requires-grad", "side-effect",
              "global", "grad-mode")


def namespace():
    """What a program's module starts with (eager and compiled alike)."""
    return {"torch": torch, "F": torch.nn.functional, "OPAQUE": OPAQUE,
            "contextlib": contextlib, "types": types, "functools": functools, "numpy": numpy,
            "operator": operator, "dataclasses": dataclasses,
            "__name__": "pyfuzz_program"}


BASE_NAMES = set(namespace()) | {"__builtins__"}


# --------------------------------------------------------------------------- features
# Each feature: its prelude (module level), its statement templates (placeholders:
# {a} {b} tensors of T, {z} {z2} 0-dim tensors of Z, {s} a value of S, {out}/{zout}/{sout}
# a new name bound in T/Z/S, {id} a fresh number), the changes it may make between calls,
# and what it adds to f's signature.

@dataclass
class Feature:
    prelude: str = ""
    templates: list = field(default_factory=list)
    between: list = field(default_factory=list)
    params: str = ""          # extra parameters of f (defaults)
    head: str = ""            # first statement of f (a `global` declaration)
    ending: list = field(default_factory=list)   # templates that raise (end the program)


FEATURES = {}

FEATURES["torch"] = Feature(templates=[
    "{out} = {a} + {b}", "{out} = {a} * 2 - {b}", "{out} = torch.relu({a})",
    "{out} = {a}.sigmoid() * {b}", "{out} = torch.where({a} > 0, {a}, {b})",
    "{zout} = {a}.sum()", "{zout} = {a}.mean()", "{zout} = {a}.amax()",
    "{out} = {a}.clone()\n{out}.mul_(2)", "{out} = {a} * {z}",
    "{out} = torch.where({a} > 1.0, float('nan'), {a})", "{out} = {a}.to(torch.float64)",
    "OPAQUE({a})", "print(end='')", "{sout} = {a}.sum().item()", "{sout} = float({z})",
    "{out} = {a} * {s}", "{a}.add_(1)",
    "{out} = {a} + 1\nif {z} > 0:\n    {out} = {a} - 1",
    # the sign of zeros, elementwise (a reduction over -0.0 and 0.0 ties: either is right)
    "{out} = torch.relu({a} * -0.0)\n{sout} = torch.signbit({out}).tolist()",
    "{out} = ({a} * -0.0).clamp(min=0)\n{sout} = torch.signbit({out}).tolist()",
])

FEATURES["property"] = Feature(
    prelude='''
class Holder:
    def __init__(self, w):
        self._w = w

    @property
    def w(self):
        LOG.append("Holder.w")
        return self._w

    @w.setter
    def w(self, v):
        LOG.append("Holder.w=")
        self._w = v


holder = Holder(2.0)
''',
    templates=["{out} = {a} * holder.w", "{out} = {a} + holder.w if holder.w > 1 else {a}",
               "holder.w = holder.w + 0.5", "{sout} = holder.w",
               "{out} = {a} * holder.w\nOPAQUE({a})\n{out} = {out} + holder.w",
               "{out} = {a}\nfor _ in range(2):\n    {out} = {out} * holder.w"],
    between=["holder._w = 3.0", "holder._w = -1.0", "holder.w = 0.5",
             "Holder.w = property(lambda self: (LOG.append('Holder.w2'), 7.0)[1])"])

FEATURES["descriptor"] = Feature(
    prelude='''
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

    def __init__(self):
        self.k = 1.5

    def __getattr__(self, name):
        LOG.append("Knobs." + name)
        return len(name)


knobs = Knobs()
''',
    templates=["{out} = {a} * knobs.k", "knobs.k = 0.25", "{out} = {a} + knobs.extra",
               "{sout} = getattr(knobs, 'depth')", "{sout} = knobs.k + knobs.k",
               "{out} = {a} * knobs.k if hasattr(knobs, 'gone') else {a}"],
    between=["knobs._k = 4.0", "knobs.k = -0.5", "knobs.extra_ = 1"])

FEATURES["dunder"] = Feature(
    prelude='''
class Box:
    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        LOG.append("Box.add")
        return Box(self.t + (o.t if isinstance(o, Box) else o))

    __radd__ = __add__

    def __getitem__(self, i):
        LOG.append("Box.getitem")
        return self.t[i]

    def __call__(self, s):
        LOG.append("Box.call")
        return self.t * s

    def __bool__(self):
        LOG.append("Box.bool")
        return bool(self.t.sum() > 0)

    def __len__(self):
        LOG.append("Box.len")
        return self.t.shape[0]


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2.0

    def forward(self, t):
        return t * self.k

    def __call__(self, t):
        LOG.append("Scale.__call__")
        return super().__call__(t) + 1


class Shift(Scale):
    def forward(self, t):
        return t + self.k


scale_mod = Scale()
''',
    templates=["{out} = (Box({a}) + {b}).t", "{out} = (Box({a}) + Box({b})).t",
               "{out} = (1.5 + Box({a})).t", "{out} = Box({a})[0] + {a}",
               "{out} = Box({a})(3)", "{out} = {a} if Box({b}) else {b}",
               "{sout} = len(Box({a}))", "{out} = {a} * len(Box({b}))",
               "{out} = sum([Box({a}), Box({b})]).t", "{out} = scale_mod({a})",
               "{out} = {a}\nif Box({a} - {z}):\n    OPAQUE({a})\n    {out} = {a} * 2"],
    between=["scale_mod.k = 3.0", "Scale.forward = lambda self, t: t - self.k",
             "Box.__call__ = lambda self, s: self.t + s", "scale_mod.__class__ = Shift",
             "Scale.__call__ = torch.nn.Module.__call__"])

FEATURES["builtins"] = Feature(templates=[
    "{zout} = max({z}, {z2})\n{sout} = {zout} is {z}",
    "{zout} = min({z}, {z2}, key=lambda t: -t)\n{sout} = {zout} is {z2}",
    "{out} = max([{a}, {b}], key=lambda t: t.sum())\n{sout} = {out} is {a}",
    "{out} = min({a}, {b}, key=torch.Tensor.mean)",
    "{zout} = max({a}.sum(1))", "{zout} = min({a}.flatten())",
    "{out} = max({a}, {b})",
    "{out} = sum([{a}, {b}, {a}])", "{out} = {a} + sum({b})", "{out} = abs({a})",
    "{sout} = len({a})", "{zout} = sorted({a}.sum(1))[0]",
    "{sout} = [float(t) for t in sorted({a}.sum(1), key=abs)]",
    "{sout} = any({a}.sum(1) > 0)", "{sout} = all({a}.flatten() > -3)",
    "{sout} = isinstance({a}, torch.Tensor)", "{sout} = isinstance({z}, (int, float))",
    "{out} = {a} * max(len({a}), 2)", "{sout} = max(1.5, float({z}))",
    "{zout} = max({z}, {z2}, {z})", "{sout} = max({z}, 0.5)",
    "{zout} = max({z}, torch.tensor(float('nan')))\n{sout} = {zout} is {z}",
    "{zout} = max({z}, {a}.sum().to(torch.float64))",
    "{zout} = max({z}.to(torch.float64), {z2})",
    "{sout} = sum(map(float, {a}.sum(1)))", "{sout} = list(map(len, [{a}, {b}]))",
    "{out} = sum(t * i for i, t in enumerate(({a}, {b})))",
])

FEATURES["closures"] = Feature(
    prelude='''
def make_counter():
    c = 0

    def inc(t):
        nonlocal c
        c += 1
        LOG.append("inc")
        return t + c
    return inc


inc = make_counter()
''',
    templates=["{out} = inc({a})",
               "{sout} = 0\ndef bump{id}(t):\n    nonlocal {sout}\n    {sout} += 1\n"
               "    return t * 2\n{out} = bump{id}({a}) + bump{id}({b})",
               "{out} = [(lambda t, i=i: t * i)({a}) for i in range(3)][-1]",
               "{sout} = 1.0\nscale{id} = lambda t: t * {sout}\n{sout} = 2.0\n{out} = scale{id}({a})",
               "{sout} = [0]\ndef push{id}(t):\n    {sout}[0] += 1\n    OPAQUE(t)\n    return t - {sout}[0]\n"
               "{out} = push{id}({a})"],
    between=["inc = make_counter()", "inc(0)"])

FEATURES["exceptions"] = Feature(
    prelude='''
TABLE = {"k": 2.0}


class Quiet:
    def __enter__(self):
        LOG.append("enter")
        return self

    def __exit__(self, typ, val, tb):
        LOG.append("exit " + (typ.__name__ if typ else "-"))
        return typ is KeyError
''',
    templates=[
        "{out} = {a} + 1\nwith contextlib.suppress(KeyError):\n    {out} = {a} * TABLE['missing']",
        "{out} = {a} + 1\nwith contextlib.suppress(KeyError):\n    OPAQUE({a})\n"
        "    {out} = {a} * TABLE['missing']",
        "try:\n    {out} = {a} * TABLE['k']\n    OPAQUE({a})\n    raise KeyError('k')\n"
        "except KeyError:\n    LOG.append('caught')\n    {out} = {out} - 1\n"
        "finally:\n    LOG.append('finally')",
        "with torch.no_grad():\n    try:\n        {out} = {a} * 2\n        print(end='')\n"
        "        raise ValueError('v')\n    except ValueError:\n        {out} = {out} + 1",
        "try:\n    try:\n        {out} = {a} / 2\n        raise KeyError('inner')\n"
        "    except KeyError as e:\n        raise ValueError('outer') from e\n"
        "except ValueError as e:\n    {out} = {a} * 3\n    {sout} = type(e.__cause__).__name__",
        "{out} = {a}.clone()\ntry:\n    {out} = {out} + {a}.sum().item()\n    {sout} = [1][2]\n"
        "except IndexError:\n    {sout} = -1\nelse:\n    {sout} = 1",
        "try:\n    with torch.no_grad():\n        {out} = {a} * 2\n        OPAQUE({out})\n"
        "        raise RuntimeError('r')\nexcept RuntimeError:\n    {out} = {a} + 2\n"
        "{sout} = torch.is_grad_enabled()",
        "{out} = {a} + 1\nwith Quiet():\n    {out} = {a} * 2\n    OPAQUE({a})\n"
        "    {out} = {out} * TABLE['nope']",
        "with torch.inference_mode():\n    {out} = {a} * 2\n{sout} = {out}.is_inference()",
        "{out} = {a}\nwith contextlib.suppress(ValueError):\n    if {z} > 0:\n"
        "        raise ValueError('positive')\n    {out} = {a} * 2",
    ],
    between=["TABLE['missing'] = 3.0", "TABLE.pop('missing', None)", "TABLE['k'] = -1.0"],
    ending=["{out} = {a} * TABLE['absent']", "OPAQUE({a})\nraise ValueError('end')",
            "with torch.no_grad():\n    {out} = {a} * 2\n    raise KeyError('in no_grad')"])

FEATURES["generators"] = Feature(
    prelude='''
def scaled(t, n):
    for i in range(n):
        LOG.append("scaled")
        yield t * (i + 1)
''',
    templates=["{out} = sum(scaled({a}, 3))", "{out} = torch.stack(list(scaled({a}, 2))).sum(0)",
               "{out} = next(scaled({a}, 4))", "{out} = sum(t * 2 for t in ({a}, {b}))",
               "def g{id}(t):\n    yield t\n    LOG.append('g{id}')\n    yield t + 1\n"
               "{out} = sum(g{id}({a}))",
               "{out} = {a}\nfor {out} in scaled({a}, 2):\n    OPAQUE({out})",
               "gen{id} = scaled({a}, 3)\n{out} = next(gen{id})\n{out} = {out} + next(gen{id})"])

FEATURES["classes"] = Feature(templates=[
    "class Loc{id}:\n    k = 2.0\n\n    def apply(self, t):\n        return t * self.k\n"
    "{out} = Loc{id}().apply({a})",
    "class Loc{id}:\n    @property\n    def k(self):\n        LOG.append('Loc{id}.k')\n"
    "        return 3.0\n{out} = {a} * Loc{id}().k",
    "class Loc{id}:\n    def __init__(self, t):\n        self.t = t\n\n    def __mul__(self, o):\n"
    "        return self.t * o\n{out} = Loc{id}({a}) * 2",
    "class Loc{id}(torch.nn.Module):\n    def forward(self, t):\n        return t.relu() + 1\n"
    "{out} = Loc{id}()({a})",
    "class Loc{id}:\n    n = 0\n\n    def __init__(self):\n        type(self).n += 1\n"
    "Loc{id}()\nLoc{id}()\n{sout} = Loc{id}.n",
])

FEATURES["globals"] = Feature(
    prelude='''
SCALE = 2.0
COUNT = 0
W_G = torch.linspace(-1.0, 1.0, 4)
ARR = numpy.ones(4, dtype=numpy.float32)
cfg = types.ModuleType("pyfuzz_cfg")
cfg.alpha = 0.5
cfg.flag = True
''',
    head="global COUNT, SCALE",
    templates=["{out} = {a} * SCALE", "{out} = {a} + cfg.alpha",
               "{out} = {a} * 2 if cfg.flag else {a} - 1", "COUNT += 1",
               "{out} = {a} * COUNT", "cfg.alpha = cfg.alpha + 1", "SCALE = SCALE * 0.5",
               "{sout} = getattr(cfg, 'beta', 1.5)", "{out} = {a} * W_G",
               "COUNT += 1\nOPAQUE({a})\n{out} = {a} + COUNT",
               "{out} = {a} * getattr(W_G, 'tag', 1.0)",
               "{out} = torch.as_tensor(ARR)\n{out}.add_(1)\n{out} = {a} * {out}"],
    between=["SCALE = 3.0", "cfg.alpha = -1.0", "cfg.flag = not cfg.flag", "cfg.beta = 4.0",
             "COUNT = 10", "W_G = W_G * 2", "W_G.mul_(-1)", "W_G.tag = 3.0",
             "ARR[0] = -2.0", "cfg = types.ModuleType('other')\n"
             "cfg.alpha = 7.0\ncfg.flag = False"])

FEATURES["defaults"] = Feature(
    params="k=2.0, acc=[], *, mode='add'",
    templates=["{out} = {a} * k", "acc.append(1)\n{out} = {a} + len(acc)",
               "{out} = {a} + 1 if mode == 'add' else {a} - 1", "{sout} = len(acc)"],
    between=["f.__defaults__ = (3.0, f.__defaults__[1])", "f.__defaults__[1].clear()",
             "f.__kwdefaults__ = {'mode': 'sub'}", "f.__defaults__[1].append(5)", "f.__defaults__ = (2 ** 40, [])"])

FEATURES["imports"] = Feature(
    prelude='''
import sys

pyworld_mod = types.ModuleType("pyworld_mod")
pyworld_mod.K = 2.0
pyworld_mod.scale = lambda t: t * pyworld_mod.K
sys.modules["pyworld_mod"] = pyworld_mod   # fresh for each run of the module


@functools.singledispatch
def kind(v):
    LOG.append("kind.object")
    return 1.0


@kind.register
def _(v: torch.Tensor):
    LOG.append("kind.tensor")
    return 2.0
''',
    templates=["import pyworld_mod\n{out} = {a} * pyworld_mod.K",
               "from pyworld_mod import K\n{out} = {a} + K",
               "from pyworld_mod import scale\n{out} = scale({a})",
               "{out} = {a} * kind({b})", "{sout} = kind({s})"],
    between=["pyworld_mod.K = 5.0", "sys.modules['pyworld_mod'].K = -1.0",
             "pyworld_mod.scale = lambda t: t - 1"])

FEATURES["protocols"] = Feature(
    prelude='''
class Seq:
    def __init__(self, ts):
        self.ts = ts

    def __iter__(self):
        LOG.append("Seq.iter")
        return iter(self.ts)

    def __contains__(self, k):
        LOG.append("Seq.contains")
        return k in ("a", "b")


class Watched:
    def __init__(self):
        object.__setattr__(self, "seen", 0)
        object.__setattr__(self, "scale", 2.0)

    def __setattr__(self, name, v):
        LOG.append("Watched.set " + name)
        object.__setattr__(self, name, v)

    def __getattribute__(self, name):
        if name == "scale":
            LOG.append("Watched.scale")
        return object.__getattribute__(self, name)


watched = Watched()


class Ops:
    factor = 3.0

    @staticmethod
    def double(t):
        return t * 2

    @classmethod
    def scale(cls, t):
        return t * cls.factor


def combine(*ts, weight=1.0, **kw):
    LOG.append("combine " + ",".join(sorted(kw)))
    return sum(ts) * weight
''',
    templates=["{out} = sum(Seq([{a}, {b}]))", "{out} = torch.stack(list(Seq([{a}, {b}]))).sum(0)",
               "{sout} = 'a' in Seq([])", "{out} = {a} * watched.scale",
               "watched.seen = watched.seen + 1", "{out} = Ops.double({a}) + Ops.scale({b})",
               "{out} = functools.partial(combine, weight=0.5)({a}, {b}, tag=1)",
               "{out} = combine(*[{a}, {b}], **{{'k': 1}})",
               "{out} = functools.reduce(operator.add, [{a}, {b}, {a}])",
               "{out} = operator.mul({a}, 2) - operator.neg({b})",
               "{out} = {a}\nfor t in Seq([{a}, {b}]):\n    OPAQUE(t)\n    {out} = {out} + t"],
    between=["Ops.factor = -1.0", "watched.scale = 5.0",
             "Seq.__contains__ = lambda self, k: True", "combine.__defaults__ = (2.0,)"])

FEATURES["classes"].templates += [
    "class Base{id}:\n    def g(self, t):\n        return t + 1\n\n\nclass Sub{id}(Base{id}):\n"
    "    def g(self, t):\n        return super().g(t) * 2\n{out} = Sub{id}().g({a})",
    "@dataclasses.dataclass\nclass DC{id}:\n    w: float = 2.0\n{out} = {a} * DC{id}().w",
]

PYTHON_FEATURES = [name for name in FEATURES if name != "torch"]


def _prelude(features):
    return "LOG = []\n" + "".join(FEATURES[name].prelude for name in features)


# --------------------------------------------------------------------------- programs

@dataclass
class PyProgram:
    source: str        # the module: prelude and `def f(x0, ...)`
    calls: list        # per call: [(shape, dtype, layout, seed), ...] (tests/fuzz/inputs.py)
    between: list = field(default_factory=list)   # per call after the first: code run before it
    grad: bool = False  # the float inputs require grad

    def args(self, k):
        out = [make(*spec) for spec in self.calls[k]]
        if self.grad:
            out = [t.requires_grad_() if t.is_floating_point() else t for t in out]
        return out

    def module(self, tag="python fuzz program"):
        """A fresh copy of the program's module (its namespace dict)."""
        _counter[0] += 1
        filename = f"<{tag} {_counter[0]}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True),
                                     filename)
        ns = namespace()
        exec(compile(self.source, filename, "exec"), ns)
        return ns

    def render(self, **header) -> str:
        lines = [f"{k.upper()} = {v!r}" for k, v in header.items()]
        lines.append("PYTHON = True")
        lines.append(f"GRAD_INPUTS = {self.grad!r}")
        lines.append("SOURCE = '''\n" + self.source + "'''")
        lines.append("BETWEEN = [  # code run in the module before each call after the first")
        for code in self.between:
            lines.append(f"    {code!r},")
        lines.append("]")
        lines.append("INPUTS = [  # one list per call: (shape, dtype, layout, seed[, values])")
        for call in self.calls:
            lines.append(f"    {[tuple(spec) for spec in call]!r},")
        lines.append("]")
        return "\n".join(lines) + "\n"

    def snippet(self, backend) -> str:
        return (f"# replay: tests/fuzz/pyworld.py, check(from_module(corpus file), {backend!r})\n"
                + self.render(backends=[backend]))


_counter = [0]


def from_module(mod) -> PyProgram:
    """A corpus module (PYTHON = True) as a PyProgram."""
    return PyProgram(mod.SOURCE.lstrip("\n"), [[tuple(s) for s in call] for call in mod.INPUTS],
                     list(mod.BETWEEN), getattr(mod, "GRAD_INPUTS", False))


def open_features(backend=None) -> frozenset:
    from tests.fuzz.gen import corpus_entry

    out = set()
    for feature, files in KNOWN_OPEN.items():
        for name in (files,) if isinstance(files, str) else files:
            entry = corpus_entry(name)
            if entry.STATUS == "open" and (backend is None or backend in entry.BACKENDS):
                out.add(feature)
    return frozenset(out)


class _Names:
    def __init__(self, inputs):
        self.T = list(inputs)
        self.Z, self.S = [], []
        self.n = 0

    def fresh(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"


def _fill(draw, names, template):
    """The template with its placeholders bound; the new names it binds."""
    pre = []
    subs = {"id": names.fresh("")}
    if "{z}" in template or "{z2}" in template:
        while len(names.Z) < 2:
            z = names.fresh("z")
            pre.append(f"{z} = {draw(st.sampled_from(names.T))}.sum()")
            names.Z.append(z)
        subs["z"] = draw(st.sampled_from(names.Z))
        subs["z2"] = draw(st.sampled_from(names.Z))
    subs["a"] = draw(st.sampled_from(names.T))
    subs["b"] = draw(st.sampled_from(names.T))
    subs["s"] = (draw(st.sampled_from(names.S + ["2"])) if names.S else "2")
    new = []
    for key, pool, prefix in (("out", names.T, "v"), ("zout", names.Z, "z"),
                              ("sout", names.S, "s")):
        if "{" + key + "}" in template:
            subs[key] = names.fresh(prefix)
            new.append((pool, subs[key]))
    code = template.format(**subs)
    return "\n".join(pre + [code]), new


@st.composite
def programs(draw, backend=None, max_statements=8, known_open=True):
    """A PyProgram: 1-3 Python features (FEATURES) and the torch statements, 1-3 calls
    with changes between them; without the KNOWN_OPEN features open on `backend`."""
    closed = open_features(backend) if known_open else frozenset()
    choices = [f for f in PYTHON_FEATURES if f not in closed]
    features = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3, unique=True))
    features = sorted(features, key=PYTHON_FEATURES.index)
    ninputs = draw(st.integers(1, 2))
    ncalls = draw(st.integers(1, 3))
    rows = [draw(st.sampled_from([2, 3, 1, 4, 0] if k else [2, 3, 1, 4]))
            for k in range(ncalls)]
    dtype = draw(st.sampled_from(["float32", "float32", "float64"]))
    layouts = [draw(st.sampled_from(["contiguous", "contiguous", "transposed", "step"]))
               for _ in range(ninputs)]
    seeds = [draw(st.integers(0, 1000)) for _ in range(ninputs)]
    calls = [[((rows[k], 4), dtype, layouts[i], seeds[i] + k) for i in range(ninputs)]
             for k in range(ncalls)]
    grad = draw(st.integers(0, 4)) == 0
    names = _Names([f"x{i}" for i in range(ninputs)])
    pool = [(f, t) for f in ["torch"] + features for t in FEATURES[f].templates
            if f"template:{t}" not in closed]
    weighted = [(f, t) for f, t in pool for _ in range(1 if f == "torch" else 3)]
    body = []
    for _ in range(draw(st.integers(1, max_statements))):
        _, template = draw(st.sampled_from(weighted))
        code, new = _fill(draw, names, template)
        body.append(code)
        for lst, name in new:
            lst.append(name)
    endings = [t for f in features for t in FEATURES[f].ending]
    if endings and draw(st.integers(0, 9)) == 0:
        code, _ = _fill(draw, names, draw(st.sampled_from(endings)))
        body.append(code)
    outs = draw(st.lists(st.sampled_from(names.T + names.Z + names.S), min_size=1, max_size=3))
    body.append("return " + ", ".join(outs) + ",")
    params = [f"x{i}" for i in range(ninputs)] + [FEATURES[f].params for f in features
                                                   if FEATURES[f].params]
    heads = [FEATURES[f].head for f in features if FEATURES[f].head]
    lines = ["    " + line for code in heads + body for line in code.split("\n")]
    source = (_prelude(features) + "\n\ndef f(" + ", ".join(params) + "):\n"
              + "\n".join(lines) + "\n")
    between = []
    changes = [c for f in features for c in FEATURES[f].between]
    for _ in range(ncalls - 1):
        picked = draw(st.lists(st.sampled_from(changes), max_size=2)) if changes else []
        between.append("\n".join(picked))
    return PyProgram(source, calls, between, grad)


# --------------------------------------------------------------------------- oracle

def _plain(v, depth=0):
    """A comparable picture of a module global (values, not identities)."""
    if depth > 5:
        return "..."
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, torch.Tensor):
        return ("tensor", str(v.dtype), tuple(v.shape), v.detach().clone())
    if isinstance(v, numpy.ndarray):
        return ("ndarray", str(v.dtype), v.tolist())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_plain(x, depth + 1) for x in v])
    if isinstance(v, dict):
        return ("dict", [(k, _plain(x, depth + 1)) for k, x in v.items()])
    if isinstance(v, types.ModuleType):
        if getattr(v, "__file__", None) or v.__name__ in sys.builtin_module_names:
            return ("module", v.__name__)    # a library's module: not the program's state
        return ("module", v.__name__, _attrs(vars(v), depth))
    if isinstance(v, types.FunctionType):
        cells = []
        for c in v.__closure__ or ():
            try:
                cells.append(_plain(c.cell_contents, depth + 1))
            except ValueError:   # an empty cell
                cells.append("<empty>")
        return ("function", v.__name__, _plain(v.__defaults__, depth + 1),
                _plain(v.__kwdefaults__, depth + 1), cells)
    if isinstance(v, type):
        return ("class", v.__qualname__, _attrs({k: x for k, x in vars(v).items()
                                                  if isinstance(x, (bool, int, float, str))},
                                                 depth))
    if isinstance(v, torch.nn.Module):
        return ("module-object", type(v).__name__, _attrs(
            {k: x for k, x in vars(v).items() if not k.startswith("_")}, depth))
    if hasattr(v, "__dict__"):
        return ("object", type(v).__name__, _attrs(vars(v), depth))
    return ("opaque", type(v).__name__)


def _attrs(d, depth):
    return sorted((k, _plain(x, depth + 1)) for k, x in d.items() if not k.startswith("__"))


def snapshot(ns) -> dict:
    """The program's world after a call: every global but the harness's, and the grad mode."""
    out = {name: _plain(v) for name, v in ns.items()
           if name not in BASE_NAMES and not name.startswith("__")}
    out["<grad mode>"] = torch.is_grad_enabled()
    return out


def _differs(got, want, floor, path):
    """The first difference between two pictures (a path and what differs), or None."""
    if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
        if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
            return f"{path}: {got!r}, eager {want!r}"
        rtol, atol = TOLERANCE.get(want.dtype, (0, 0))
        rtol, atol = max(rtol, floor[0]), max(atol, floor[1])
        try:
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                       check_stride=False)
        except (AssertionError, TypeError) as e:
            return f"{path}: {str(e).splitlines()[0]}"
        return None
    if isinstance(want, float) and isinstance(got, float):
        tol = max(1e-4, floor[0])
        if got == want or abs(got - want) <= tol * max(1.0, abs(want)) or (
                got != got and want != want):
            return None
        return f"{path}: {got!r}, eager {want!r}"
    if isinstance(want, (tuple, list)) and isinstance(got, (tuple, list)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"{path}: {_short(got)}, eager {_short(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            bad = _differs(g, w, floor, f"{path}[{i}]")
            if bad:
                return bad
        return None
    if type(got) is not type(want) or got != want:
        return f"{path}: {got!r}, eager {want!r}"
    return None


def _short(v):
    text = repr(v)
    return text if len(text) < 200 else text[:200] + "..."


@dataclass
class PyReference:
    calls: list    # per call: (args after the call, result, exception or None, snapshot)


def _call(fn, ns, program, k):
    args = program.args(k)
    if k:
        try:
            exec(program.between[k - 1], ns)
        except Exception as e:   # a change that raises (in eager's module too): it ends the run
            return args, None, e, snapshot(ns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _seed(k)
        try:
            result, err = fn(*args), None
        except Exception as e:
            result, err = None, e
        finally:
            grad_mode = torch.is_grad_enabled()
            torch.set_grad_enabled(True)   # a leaked no_grad must not reach the next run
    world = snapshot(ns)
    world["<grad mode>"] = grad_mode
    return args, result, err, world


def reference(program) -> PyReference:
    ns = program.module("python fuzz program (eager)")
    calls = []
    for k in range(len(program.calls)):
        calls.append(_call(ns["f"], ns, program, k))
        if calls[-1][2] is not None:
            break
    return PyReference(calls)


def _world_outcome(got, want, floor):
    if got["<grad mode>"] != want["<grad mode>"]:
        return Outcome("grad-mode", f"grad mode after the call: {got['<grad mode>']},"
                                    f" eager {want['<grad mode>']}")
    if "LOG" in want:
        g, w = got.get("LOG"), want["LOG"]
        if g != w:
            ge, we = g[1] if g else [], w[1]
            first = next((i for i, (a, b) in enumerate(zip(ge, we)) if a != b),
                         min(len(ge), len(we)))
            event = (we[first] if first < len(we) else ge[first])
            return Outcome("side-effect", f"LOG[{event}]: compiled {_short(ge)},"
                                          f" eager {_short(we)}")
    for name in sorted(set(got) | set(want)):
        if name in ("LOG", "<grad mode>"):
            continue
        if name not in got or name not in want:
            return Outcome("global", f"{name}: {'missing' if name not in got else 'extra'}"
                                     " after the compiled call")
        bad = _differs(got[name], want[name], floor, name)
        if bad:
            return Outcome("global", f"{name}: {bad}")
    return None


def _requires_grad(got, want):
    for (name, g), (_, w) in zip(_leaves(got)[0], _leaves(want)[0]):
        if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) and \
                g.requires_grad != w.requires_grad:
            return Outcome("requires-grad", f"{name}: requires_grad {g.requires_grad},"
                                            f" eager {w.requires_grad}")
    return None


def compare(program, backend, ref: PyReference, relax=frozenset(), dynamic=None) -> Outcome:
    ns = program.module()
    compiled = refcomp.compile(ns["f"], backend=backend, dynamic=dynamic)
    floor = program_tolerance(program)
    raised = False
    for k, (args_e, want, err_e, world_e) in enumerate(ref.calls):
        args_c, got, err_c, world_c = _call(compiled, ns, program, k)
        if err_e is not None:
            raised = True
            if err_c is None:
                return Outcome("missed-raise", f"eager raised {type(err_e).__name__}: {err_e}"
                                               " but the compiled call returned", k)
            if type(err_c) is not type(err_e):
                return Outcome("wrong-exception",
                               f"{type(err_c).__name__}: {err_c}\n(eager raised"
                               f" {type(err_e).__name__}: {err_e})", k)
        elif err_c is not None:
            return Outcome("crash", f"{type(err_c).__name__}: {err_c}", k)
        else:
            bad = (_compare_results(got, want, args_c, args_e, relax, floor)
                   or _requires_grad(got, want))
            if bad:
                bad.call = k
                return bad
        with torch.no_grad():
            bad = _compare_inputs(args_c, args_e, floor)
        bad = bad or _world_outcome(world_c, world_e, floor)
        if bad:
            bad.call = k
            return bad
        if err_e is not None:
            break
    return Outcome("ok-raise" if raised else "ok")


def signature(out: Outcome) -> str:
    """A class key for a soak's counts: the kind, and for an exception, a side effect or a
    global, what it is about."""
    if out.kind in ("side-effect", "global"):
        first = out.detail.split(":")[0]
        return f"{out.kind}: {''.join(c for c in first if not c.isdigit())}"
    return out.signature()


def outcome(program, backend, relax=frozenset(), dynamic=None) -> Outcome:
    return compare(program, backend, reference(program), relax, dynamic)


def report(program, backend, out: Outcome) -> str:
    return (f"refcomp backend {backend!r} differs from eager at call {out.call}"
            f" [{out.kind}]: {out.detail}\n\n--- program (corpus format) ---\n"
            + program.render(backends=[backend], symptom=signature(out)))


def check(program, backend, relax=frozenset(), dynamic=None):
    out = outcome(program, backend, relax, dynamic)
    assert not out.failed, report(program, backend, out)
    return out


def relaxed_checks(backend=None) -> frozenset:
    return frozenset(f for f in open_features(backend) if f.startswith("check:"))


# --------------------------------------------------------------------------- crashes
# A program that crashes the interpreter (a segfault in generated bytecode) would end the
# process that runs it: the corpus replays this generator's programs in a child process
# (`isolated_outcome`), and the soak's --isolate runs its loop in children.

def load_file(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("pyworld_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def isolated_outcome(path, backend, timeout=600) -> Outcome:
    """The outcome of the corpus file `path` on `backend`, run in a child process; a child
    killed by a signal is an "interpreter-crash"."""
    import json
    import os
    import signal
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "tests.fuzz.pyworld", str(path), backend],
                       capture_output=True, text=True, cwd=root, env=env, timeout=timeout)
    if r.returncode < 0:
        return Outcome("interpreter-crash", f"{signal.Signals(-r.returncode).name}"
                                            f" (the child died)\n{r.stderr[-2000:]}")
    if r.returncode != 0 or not r.stdout.strip():
        return Outcome("crash", f"the child exited {r.returncode}\n{r.stderr[-2000:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return Outcome(d["kind"], d["detail"], d["call"])


def _main(argv):
    import json

    path, backend = argv
    out = outcome(from_module(load_file(path)), backend)
    print(json.dumps({"kind": out.kind, "detail": out.detail, "call": out.call}))


if __name__ == "__main__":
    _main(sys.argv[1:])
