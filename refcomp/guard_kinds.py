"""Guard kinds as records: for each kind, in one place, the fact it stands for, how it is
emitted into the generated check, how it is described and how a failure is explained
(expected and actual).

Owns: `GuardKind`, `KINDS` (name -> record), `Guard`.  spec/guards.md's table of kinds
is checked against `KINDS` by tests/frontend/test_guard_kinds.py (`spec_table()`
renders the rows).  Must not know bytecode or tracing.  Code generation itself
(loading sources once, the C++ tensor checker, counters) is refcomp/guards.py.

An `emit(cg, guard)` returns the Python condition (text) that holds when the fact
holds; it may load sources (`cg.load`) and bind constants (`cg.const`) — never put a
user string into the text (Note [Names are data], spec/guards.md).  `explain(guard,
value)` gets the value now at the guard's source (None for global-state kinds, which
read the state themselves) and returns `(expected, actual)`, e.g.
`("L['x'].shape[0] == 8", "9")`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from refcomp import global_state
from refcomp.sources import Source, size_text


@dataclass(frozen=True)
class GuardKind:
    name: str
    fact: str  # the fact of the trace that yields this kind (spec table, first column)
    check: str  # what the generated check compares (spec table, last column)
    emit: Callable  # (cg, guard) -> condition text
    describe: Callable  # (guard) -> readable statement of the fact
    explain: Callable  # (guard, value now) -> (expected, actual)
    # Reads process-wide state, no argument: checked after the argument guards
    # (Note [Arguments first] in spec/guards.md).
    process_wide: bool = False


KINDS: dict = {}


def kind(name, fact, check, *, emit, describe, explain=None, process_wide=False) -> str:
    """Register a kind; returns its name (the constant other modules compare with)."""
    KINDS[name] = GuardKind(name, fact, check, emit, describe,
                            explain or (lambda g, v: (g.describe(), _short(v))), process_wide)
    return name


def _short(value, limit: int = 60) -> str:
    if isinstance(value, torch.Tensor):
        return (f"{type(value).__name__} {value.dtype} on {value.device}, shape"
                f" {list(value.shape)}, stride {list(value.stride())},"
                f" requires_grad={value.requires_grad}")
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user __repr__ that fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(eq=False)
class Guard:
    """One fact.  `source` is None for global-state guards; `expected` is plain data.

    `failures` counts the slow path's explanations of misses (stats()
    "guard_failures"); the fast path's per-guard counts are in the GuardSet's
    profile (refcomp.guard_profile()).
    """

    kind: str
    source: Optional[Source]
    expected: Any
    sources: tuple = ()  # NO_ALIASING: the tensors that must not overlap
    failures: int = 0
    time_ns: int = 0  # sampled time of this guard checked alone (Note [Guard profile])
    timed: int = 0

    @property
    def name(self) -> str:
        return self.source.name() if self.source is not None else "<global state>"

    def describe(self) -> str:
        return KINDS[self.kind].describe(self)

    def explain(self, value) -> tuple[str, str]:
        """(expected, actual) for a failure of this guard with `value` at its source."""
        return KINDS[self.kind].explain(self, value)

    def failure_reason(self, value) -> str:
        """The expected part of `explain` (readable, like `L['x'].shape[0] == 8`)."""
        return self.explain(value)[0]


# --- tensors ------------------------------------------------------------------------------
def _tensor_emit(cg, g):
    v, e = cg.load(g.source), g.expected
    conds = [f"_type({v}) is {cg.const(e.type)}", f"{v}.dtype is {cg.const(e.dtype)}"]
    if None in e.shape:  # dynamic dims: static dims and contiguity pin the strides
        conds.append(f"{v}.dim() == {len(e.shape)}")
        conds += [f"{v}.shape[{i}] == {d}" for i, d in enumerate(e.shape) if d is not None]
        conds.append(f"{v}.is_contiguous()")
    else:
        conds.append(f"{v}.shape == {cg.const(e.shape)}")
        conds.append(f"{v}.stride() == {cg.const(e.stride)}")
    conds.append(f"{v}.device == {cg.const(e.device)}")
    conds.append(f"{v}.requires_grad is {cg.const(e.requires_grad)}")
    return " and ".join(conds)


def _tensor_describe(g):
    s, e = g.name, g.expected
    return (f"{s}: {e.type.__name__} {e.dtype} on {e.device}, shape {list(e.shape)},"
            f" stride {list(e.stride)}, requires_grad={e.requires_grad}")


def _tensor_explain(g, value):
    s, e = g.name, g.expected
    if type(value) is not e.type:
        return f"type({s}) is {e.type.__name__}", type(value).__name__
    if value.dtype != e.dtype:
        return f"{s}.dtype == {e.dtype}", str(value.dtype)
    if value.device != e.device:
        return f"{s}.device == {e.device}", str(value.device)
    if value.dim() != len(e.shape):
        return f"{s}.dim() == {len(e.shape)}", str(value.dim())
    for i, (got, want) in enumerate(zip(value.shape, e.shape)):
        if want is not None and got != want:
            return f"{s}.shape[{i}] == {want}", str(got)
    if None in e.shape and not value.is_contiguous():
        return f"{s}.is_contiguous()", f"stride {list(value.stride())}"
    if any(w is not None and got != w for got, w in zip(value.stride(), e.stride)):
        return f"{s}.stride() == {e.stride}", str(tuple(value.stride()))
    if value.requires_grad != e.requires_grad:
        return f"{s}.requires_grad == {e.requires_grad}", str(value.requires_grad)
    return (f"{s}'s dispatch keys as traced (C++ tensor check; e.g. inference mode)",
            "different dispatch keys")


TENSOR_MATCH = kind(
    "TENSOR_MATCH",
    "a tensor read from a source (argument, parameter, buffer, list item...)",
    "exact type (Tensor/Parameter), dtype, device, shape, strides, requires_grad",
    emit=_tensor_emit, describe=_tensor_describe, explain=_tensor_explain)


# --- Python values ------------------------------------------------------------------------
def _equals_emit(cg, g):
    v, e = cg.load(g.source), g.expected
    head = f"_type({v}) is {cg.const(type(e))}"
    if type(e) is float and e != e:  # NaN: never == itself
        return f"{head} and {v} != {v}"
    if type(e) is float and e == 0.0:  # 0.0 == -0.0, but x / 0.0 and x / -0.0 differ
        sign = math.copysign(1.0, e)
        return f"{head} and {v} == 0.0 and {cg.const(math.copysign)}(1.0, {v}) == {sign!r}"
    return f"{head} and {v} == {cg.const(e)}"


def _equals_describe(g):
    return f"{g.name} == {g.expected!r}"


EQUALS_MATCH = kind(
    "EQUALS_MATCH",
    "an int/float/bool/str/None/bytes (value steers tracing: branches, shape arithmetic,"
    " op attributes), a dtype or device, a set of constants; a module's `training` flag and"
    " every hyperparameter a module handler reads (`Softmax.dim`,"
    " `LeakyReLU.negative_slope`, `eps`, `stride`...); a fact derived from another object"
    " (`hasattr(o, name)`, `k in o`, `len(o)`, `bool(o)`); a graph input's storage offset"
    " where an `as_strided`-family call counts an explicit offset from its storage's start",
    "exact type and `==`; a float also by sign (`0.0` vs `-0.0`) and NaN (`v != v`)",
    emit=_equals_emit, describe=_equals_describe)

ID_MATCH = kind(
    "ID_MATCH",
    "a module, function, class, Python module or builtin used; an enum member; an object"
    " compared with `is`/`==`; a called function's `__code__`",
    "`id(obj)` (modules are held weakly, see \"Cache\")",
    emit=lambda cg, g: f"_id({cg.load(g.source)}) == {cg.const(g.expected[0])}",
    describe=lambda g: f"{g.name} is the same object ({g.expected[1]})",
    explain=lambda g, v: (f"{g.name} is {g.expected[1]}",
                          f"another object: {_short(v)}"))

TYPE_MATCH = kind(
    "TYPE_MATCH",
    "any other object whose attributes are read; a bound method (a new object at each"
    " read: its `__func__` by `ID_MATCH`, its `__self__` by its own kind); a"
    " comprehension's function on the stack at a break (new at each call: its `__code__`"
    " by `ID_MATCH`)",
    "exact type; each attribute read is guarded by its own kind",
    emit=lambda cg, g: f"_type({cg.load(g.source)}) is {cg.const(g.expected)}",
    describe=lambda g: f"type({g.name}) is {g.expected.__qualname__}",
    explain=lambda g, v: (g.describe(), type(v).__qualname__))

LENGTH_CHECK = kind(
    "LENGTH_CHECK",
    "a list or tuple (iterated, indexed, unpacked); the `_modules` of a `ModuleList`/"
    "`Sequential` (numbered `0..n-1`) iterated, indexed or measured",
    "exact type and `len`",
    emit=lambda cg, g: (f"_type({cg.load(g.source)}) is {cg.const(g.expected[0])} and"
                        f" len({cg.load(g.source)}) == {cg.const(g.expected[1])}"),
    describe=lambda g: (f"type({g.name}) is {g.expected[0].__name__} and len({g.name}) =="
                        f" {g.expected[1]}"),
    explain=lambda g, v: (g.describe(), f"{type(v).__name__} of length {len(v)}"
                          if isinstance(v, (list, tuple, dict)) else _short(v)))

DICT_KEYS = kind(
    "DICT_KEYS",
    "a dict (items read, keys tested, iterated); the `_modules` of a `ModuleDict` (or of a"
    " container with other names) iterated, indexed or measured",
    "exact type and key order",
    # expected = (exact dict type, keys in order): a ModuleList's `_modules` becomes an
    # OrderedDict after `del`, so the type is recorded, not assumed.
    emit=lambda cg, g: (f"_type({cg.load(g.source)}) is {cg.const(g.expected[0])} and"
                        + (f" list({cg.load(g.source)}) == {cg.const(list(g.expected[1]))}"
                           if g.expected[1] else f" not {cg.load(g.source)}")),
    describe=lambda g: f"list({g.name}.keys()) == {list(g.expected[1])!r}",
    explain=lambda g, v: (g.describe(), _short(list(v)) if isinstance(v, dict)
                          else _short(v)))

NOT_IN_DICT = kind(
    "NOT_IN_DICT",
    "an attribute the trace resolved on the class (a module's `forward` or another"
    " method): no instance attribute overrides it",
    "the name is not a key of the object's `__dict__`",
    emit=lambda cg, g: f"{cg.const(g.expected)} not in {cg.load(g.source)}",
    describe=lambda g: f"{g.expected!r} not in {g.name}",
    explain=lambda g, v: (g.describe(), f"{g.expected!r} is set to"
                          f" {_short(v.get(g.expected)) if isinstance(v, dict) else _short(v)}"))

# A module's own hook dicts (read from its `__dict__`, which NOT_IN_DICT loads too) and the
# global ones: inline truth tests, no call (a `has_hooks(m)` call per submodule tripled
# the check of a 10-layer Sequential).
MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                "_backward_pre_hooks")


def _global_hook_dicts() -> tuple:
    from torch.nn.modules import module as mm

    return (mm._global_forward_hooks, mm._global_forward_pre_hooks,
            mm._global_backward_hooks, mm._global_backward_pre_hooks)


def _hooks_present(d) -> str:
    names = [n for n in MODULE_HOOKS if d.get(n)] if isinstance(d, dict) else []
    return ", ".join(names) or _short(d)


NO_HOOKS = kind(
    "NO_HOOKS",
    "a module called with no forward/backward hooks of its own",
    "its four hook dicts (read from its `__dict__`) are empty",
    emit=lambda cg, g: "not (" + " or ".join(
        f"{cg.load(g.source)}[{cg.const(n)}]" for n in MODULE_HOOKS) + ")",
    describe=lambda g: f"no hooks in {g.name}",
    explain=lambda g, v: (g.describe(), _hooks_present(v)))

NO_GLOBAL_HOOKS = kind(
    "NO_GLOBAL_HOOKS",
    "a module called while no global module hook is registered",
    "`torch.nn.modules.module`'s global hook dicts are empty",
    emit=lambda cg, g: "not (" + " or ".join(
        cg.const(d) for d in _global_hook_dicts()) + ")",
    describe=lambda g: "no global module hooks",
    explain=lambda g, v: (g.describe(), "a global module hook is registered"),
    process_wide=True)


# --- global state -------------------------------------------------------------------------
GRAD_MODE = kind(
    "GRAD_MODE", "grad mode", "`torch.is_grad_enabled()`",
    emit=lambda cg, g: f"{cg.const(torch.is_grad_enabled)}() is {cg.const(g.expected)}",
    describe=lambda g: f"torch.is_grad_enabled() == {g.expected}",
    explain=lambda g, v: (g.describe(), str(torch.is_grad_enabled())), process_wide=True)

DEFAULT_DTYPE = kind(
    "DEFAULT_DTYPE", "default dtype", "`torch.get_default_dtype()`",
    emit=lambda cg, g: f"{cg.const(torch.get_default_dtype)}() is {cg.const(g.expected)}",
    describe=lambda g: f"torch.get_default_dtype() == {g.expected}",
    explain=lambda g, v: (g.describe(), str(torch.get_default_dtype())), process_wide=True)


def _global_emit(cg, g):
    if global_state.is_plain(g.expected):  # the common case: four C calls, inline
        return " and ".join(f"not {cg.const(f)}()" for f in global_state.PLAIN_CHECKS)
    return f"{cg.const(global_state.snapshot)}() == {cg.const(g.expected)}"


GLOBAL_STATE = kind(
    "GLOBAL_STATE",
    "global torch state (autocast enabled and dtype per device, torch function mode stack"
    " — which holds the default device —, dispatch mode stack, deterministic algorithms)",
    "the same state (no autocast, no modes, not deterministic: four C calls)",
    emit=_global_emit,
    describe=lambda g: f"global torch state: {global_state.describe(g.expected)}",
    explain=lambda g, v: global_state.difference(g.expected, global_state.snapshot()),
    process_wide=True)


# --- tensors' relations -------------------------------------------------------------------
def _aliasing_emit(cg, g):
    # sources: the written-back inputs first (expected: how many), then every other input
    ptrs = [f"{cg.load(s)}.untyped_storage().data_ptr()" for s in g.sources]
    written, others = ptrs[:g.expected], ptrs[g.expected:]
    text = f"len({{{', '.join(written)}}}) == {len(written)}"
    if others:
        text += f" and {{{', '.join(written)}}}.isdisjoint(({', '.join(others)},))"
    return text


NO_ALIASING = kind(
    "NO_ALIASING", "inputs that the graph writes back to",
    "each one's storage is shared with no other input (other inputs may share theirs)",
    emit=_aliasing_emit,
    describe=lambda g: "no storage shared between "
    + ", ".join(x.name() for x in g.sources[:g.expected]) + " and another input",
    explain=lambda g, v: (g.describe(), "two of them share a storage"))


def _shape_emit(cg, g):
    # expected = (text, callable over sizes, [(source, dim) per size argument])
    sizes = [f"{cg.load(src)}.shape[{dim}]" for src, dim in g.expected[2]]
    return f"{cg.const(g.expected[1])}({', '.join(sizes)})"


SHAPE_ENV = kind(
    "SHAPE_ENV",
    "dynamic sizes (`dynamic=True`, `mark_dynamic`, automatic dynamic): duck-sized"
    " equalities, `>= 2`, decided relations, specializations",
    "a generated predicate over the sizes",
    emit=_shape_emit, describe=lambda g: g.expected[0],
    explain=lambda g, v: (g.expected[0], "false for the sizes " + ", ".join(
        size_text(src, d) for src, d in g.expected[2])))


def _version_explain(g, value):
    if id(value) != g.expected[0]:
        return f"{g.name} is the frozen tensor (it was replaced)", _short(value)
    return f"{g.name}._version == {g.expected[1]}", str(getattr(value, "_version", None))


TENSOR_VERSION = kind(
    "TENSOR_VERSION",
    "a parameter or buffer whose value was read at compile time (`freeze`, below)",
    "`id` and `tensor._version`",
    emit=lambda cg, g: (f"_id({cg.load(g.source)}) == {cg.const(g.expected[0])} and"
                        f" {cg.load(g.source)}._version == {cg.const(g.expected[1])}"),
    describe=lambda g: f"{g.name} is the frozen tensor and {g.name}._version =="
                       f" {g.expected[1]}",
    explain=_version_explain)

GUARD_KINDS = tuple(KINDS)


def spec_table() -> list[tuple[str, str, str]]:
    """(fact, kind, check) per kind: the rows spec/guards.md's table must have."""
    return [(k.fact, k.name, k.check) for k in KINDS.values()]
