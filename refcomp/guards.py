"""Guards: the facts a trace relied on, compiled into one generated Python function.

Owns: `GuardSet`, which generates one check function per set (loading each source
once, tensors checked by torch's C++ checker), its slow path naming each failing
guard with expected and actual values, and its profile (per-guard checks, failures,
sampled time).  The kinds themselves — what each checks, how it is emitted,
described and explained — are records in refcomp/guard_kinds.py; their names are
re-exported here (`guards.TENSOR_MATCH`...).  Must not know bytecode.  Spec:
spec/guards.md.

The generated function `check(L, G, C, B)` (locals, globals, closure cells,
builtins) returns the tuple of graph-input tensors when every guard holds and
None otherwise: guarding and argument extraction are one pass.

The Notes cited here are defined in spec/guards.md: Note [Fast tensor checks], Note [Names
are data] ("The generated check"), Note [Arguments first] ("Cache and recompiles"), Note
[Guard profile] ("Guard profile").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from refcomp.guard_kinds import (  # noqa: F401 - re-exported kind names
    DEFAULT_DTYPE,
    DICT_KEYS,
    EQUALS_MATCH,
    GLOBAL_STATE,
    GRAD_MODE,
    GUARD_KINDS,
    ID_MATCH,
    KINDS,
    LENGTH_CHECK,
    NO_ALIASING,
    NO_GLOBAL_HOOKS,
    NO_HOOKS,
    NOT_IN_DICT,
    SHAPE_ENV,
    TENSOR_MATCH,
    TENSOR_VERSION,
    TYPE_MATCH,
    Guard,
)
from refcomp.sources import Source

TIME_EVERY = 64  # guard checks per timed one (See Note [Sampled guard time])
PROFILE_EVERY = 8  # timed checks per instrumented one (See Note [Guard profile])


@dataclass(frozen=True)
class TensorFacts:
    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool


def tensor_facts(t: torch.Tensor, dynamic_dims=()) -> TensorFacts:
    """The facts of `t`; sizes of `dynamic_dims` are None (checked by SHAPE_ENV instead).

    A dynamic tensor is contiguous, so stride i is the product of the sizes after i: it
    is None (pinned by the contiguity check instead) when one of those sizes is dynamic.
    """
    shape = tuple(None if i in dynamic_dims else d for i, d in enumerate(t.shape))
    last = max(dynamic_dims, default=-1)
    stride = tuple(None if i < last else st for i, st in enumerate(t.stride()))
    return TensorFacts(type(t), t.dtype, t.device, shape, stride, bool(t.requires_grad))


def changed_dims(g: Guard, value) -> tuple:
    """TENSOR_MATCH: the static dims whose size alone differs in `value` (same type, dtype,
    device and rank); what automatic dynamic makes symbolic.  Else ()."""
    e = g.expected
    if (g.kind != TENSOR_MATCH or type(value) is not e.type or value.dtype != e.dtype
            or value.device != e.device or value.dim() != len(e.shape)):
        return ()
    return tuple(i for i, (got, want) in enumerate(zip(value.shape, e.shape))
                 if want is not None and got != want)


def pinned_contiguous(guards: list, sources: list) -> tuple:
    """Per source: whether a TENSOR_MATCH guard pins its dtype, every size and strides that
    are contiguous ones, so a tensor that passes is laid out as the trace's example.

    What a backend may then skip is Note [Guarded inputs] (codegen/runtime.py).  A dynamic
    size is not pinned (a symbolic input keeps its checks); a dropped guard
    (`guard_filter_fn`) pins nothing.
    """
    pinned = set()
    for g in guards:
        e = g.expected
        if g.kind == TENSOR_MATCH and None not in e.shape and _is_contiguous(e.shape, e.stride):
            pinned.add(g.source.name())
    return tuple(src.name() in pinned for src in sources)


def _is_contiguous(shape: tuple, stride: tuple) -> bool:
    """torch's `is_contiguous()` of these sizes and strides (size-1 dims' strides are free)."""
    if 0 in shape:
        return True
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


class _Codegen:
    """Builds the text of one check function; see Note [Names are data].

    `lines` holds ("load", text) and ("require", condition, line index) items;
    `line_guards[i]` are the guards of require line i (Note [Guard profile]).
    """

    def __init__(self):
        self.namespace: dict = {"_id": id, "_type": type}
        self.lines: list = []
        self.loaded: dict = {}  # source name -> local variable
        self.line_guards: list = []

    def const(self, value) -> str:
        name = f"_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def load(self, source: Source) -> str:
        key = source.name()
        if key not in self.loaded:
            expr = source.expr(self)
            var = f"v{len(self.loaded)}"
            self.lines.append(("load", f"{var} = {expr}"))
            self.loaded[key] = var
        return self.loaded[key]

    def require(self, condition: str, guards: list) -> None:
        self.lines.append(("require", condition, len(self.line_guards)))
        self.line_guards.append(list(guards))

    def emit(self, g: Guard) -> None:
        self.require(KINDS[g.kind].emit(self, g), [g])

    def function(self, body_end: list, profiled: bool) -> str:
        """`make(constants...) -> check`: the plain check, or (profiled) its instrumented
        copy that adds each line's time to _T (Note [Guard profile])."""
        body = []
        if profiled:
            body.append("_t = _now()")
        for item in self.lines:
            if item[0] == "load":
                body.append(item[1])
            elif profiled:
                body.append(f"_c = {item[1]}")
                body.append(f"_n = _now(); _T[{item[2]}] += _n - _t; _t = _n")
                body.append("if not _c: return None")
            else:
                body.append(f"if not ({item[1]}): _F[{item[2]}] += 1; return None")
        body += body_end
        extra = ("_T", "_now") if profiled else ("_F",)
        names = sorted(list(self.namespace) + list(extra))
        fail = "return None" if profiled else "_F[-1] += 1; return None"
        # Constants are the closure of `check` (LOAD_DEREF), cheaper than globals.
        text = f"def make({', '.join(names)}):\n    def check(L, G, C, B):\n        try:\n"
        text += "".join(f"            {line}\n" for line in body)
        text += f"        except Exception:\n            {fail}\n    return check\n"
        return text

    def build(self, text: str, **extra):
        namespace: dict = {}
        exec(compile(text, "<refcomp guards>", "exec"), namespace)
        consts = dict(self.namespace, **extra)
        return namespace["make"](*(consts[n] for n in sorted(consts)))


try:  # torch's C++ tensor checker (what Dynamo used before its guard manager)
    from torch._C._dynamo.guards import TensorGuards as _CTensorGuards
except ImportError:  # pragma: no cover - depends on the torch build
    _CTensorGuards = None


def _emit_tensors(cg: _Codegen, tensor_guards: list, examples: list) -> None:
    """All TENSOR_MATCH guards at once: one C++ call when torch has one, else Python.

    See Note [Fast tensor checks].
    """
    if not tensor_guards:
        return
    if _CTensorGuards is not None and examples is not None:
        # The C++ checker rejects one tensor passed twice; a tensor the trace saw at
        # several sources is checked in C++ once and in Python at its other sources.
        seen, fast, fast_examples = set(), [], []
        for g, t in zip(tensor_guards, examples):
            if id(t) in seen:
                cg.emit(g)
            else:
                seen.add(id(t))
                fast.append(g)
                fast_examples.append(t)
        tensor_guards, examples = fast, fast_examples
    loaded = [cg.load(g.source) for g in tensor_guards]
    if _CTensorGuards is not None and examples is not None:
        checker = _CTensorGuards(*examples,
                                 dynamic_dims_sizes=[list(g.expected.shape) for g in
                                                     tensor_guards],
                                 dynamic_dims_strides=[list(g.expected.stride) for g in
                                                       tensor_guards])
        # The C++ check covers the exact Python type (Tensor vs Parameter), dispatch keys,
        # dtype, device, sizes, strides and requires_grad.
        cg.require(f"{cg.const(checker.check)}({', '.join(loaded)})", tensor_guards)
        for v, g in zip(loaded, tensor_guards):
            if None in g.expected.stride:  # unchecked strides: contiguity pins them
                cg.require(f"{v}.is_contiguous()", [g])
        return
    for g in tensor_guards:
        cg.emit(g)


@dataclass
class GuardSet:
    """The guards of one cache entry, compiled to `check(L, G, C, B) -> inputs | None`."""

    guards: list
    input_sources: list  # sources of the graph inputs, in graph-input order
    source_code: str = ""
    check: Any = None
    time_ns: int = 0  # summed over the timed checks (See Note [Sampled guard time])
    timed: int = 0
    stats: dict = field(default_factory=dict)

    examples: Any = None  # the tensors the trace saw, in TENSOR_MATCH order (not kept)

    def __post_init__(self):
        cg = _Codegen()
        tensor_guards = [g for g in self.guards if g.kind == TENSOR_MATCH]
        wide = [g for g in self.guards if KINDS[g.kind].process_wide]
        for g in self.guards:
            if g.kind != TENSOR_MATCH and not KINDS[g.kind].process_wide:
                cg.emit(g)
        _emit_tensors(cg, tensor_guards, self.examples)
        for g in wide:  # Note [Arguments first]
            cg.emit(g)
        self.examples = None
        outs = [cg.load(s) for s in self.input_sources]
        ret = [f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"]
        self.line_guards = cg.line_guards
        # Per require line, failures; the last slot counts exceptions (a source that
        # could not be read): Note [Guard profile].  `calls` and these counts are read
        # through properties that first add what cache lookups tallied but did not
        # count yet (Note [Counts a lookup derives], refcomp/lookup.py).
        self._calls = 0
        self._line_failures = [0] * (len(cg.line_guards) + 1)
        self.tallies: set = set()  # the lookups holding uncounted checks of this set
        self.line_time_ns = [0] * len(cg.line_guards)
        self.profiled = 0
        self.source_code = cg.function(ret, profiled=False)
        self.check = cg.build(self.source_code, _F=self._line_failures)
        self._codegen, self._ret = cg, ret  # the instrumented copy is built on first use
        self._profiled_check = None

    def _settle(self) -> None:
        for tally in list(self.tallies):
            tally.flush()

    @property
    def calls(self) -> int:
        """Checks of this set so far (exact: Note [Counts a lookup derives])."""
        self._settle()
        return self._calls

    @calls.setter
    def calls(self, n: int) -> None:
        self._settle()
        self._calls = n

    @property
    def line_failures(self) -> list:
        """Failures per require line, then exceptions (Note [Guard profile])."""
        self._settle()
        return self._line_failures

    def timed_check(self, L, G, C, B):
        """`check`, timed: the cache lookup calls it for the first check and one in
        TIME_EVERY after it, and `check` itself otherwise.

        Note [Sampled guard time]: two clock reads cost ~0.2 us, a quarter of a small
        frame's guard check, on every call.  The mean over a sample (the first check,
        then one in TIME_EVERY) is what stats() reports as time per check; the count of
        checks (`calls`, kept by the lookup) stays exact.
        """
        start = time.perf_counter_ns()
        out = self.check(L, G, C, B)
        self.time_ns += time.perf_counter_ns() - start
        self.timed += 1
        if self.timed % PROFILE_EVERY == 1:
            self._profile_once(L, G, C, B)
        return out

    def _profile_once(self, L, G, C, B) -> None:
        """One instrumented check: adds each line's time (Note [Guard profile])."""
        if self._profiled_check is None:
            cg = self._codegen
            self._raw_times = [0] * len(self.line_guards)
            self._profiled_check = cg.build(cg.function(self._ret, profiled=True),
                                            _T=self._raw_times, _now=time.perf_counter_ns)
        raw = self._raw_times
        for i in range(len(raw)):
            raw[i] = 0
        self._profiled_check(L, G, C, B)
        clock = _clock_cost_ns()
        for i, t in enumerate(raw):
            self.line_time_ns[i] += max(t - clock, 0) if t else 0
        self.profiled += 1

    def profile(self) -> list[dict]:
        """Per line of the check: its guards, checks, failures and sampled time.

        `checks` is exact when no check raised (Note [Guard profile]); `time_us` is
        the mean over the sampled instrumented checks that reached the line.
        """
        fails = self.line_failures
        passes = max(self.calls - sum(fails), 0)
        rows, later = [], sum(fails[:-1])
        for i, guards in enumerate(self.line_guards):
            checks = passes + later
            later -= fails[i]
            if len(guards) == 1:
                what = guards[0].describe()
            else:
                what = (f"{len(guards)} tensors (one C++ check): "
                        + ", ".join(g.name for g in guards))
            rows.append({"kind": guards[0].kind, "guard": what, "checks": checks,
                         "failures": fails[i],
                         "time_us": (self.line_time_ns[i] / self.profiled / 1e3)
                         if self.profiled else 0.0})
        return rows

    def failures(self, L, G, C, B) -> list[str]:
        """Slow path: every failing guard, described readably; counts each failure."""
        return [f.expected for f in self.explain(L, G, C, B)]

    def explain(self, L, G, C, B, count: bool = True) -> list:
        """Slow path: a `Failure` (guard, expected, actual) per failing guard; counts each."""
        failed = []
        for g in self.guards:
            if _single(g)(L, G, C, B) is None:
                if count:
                    g.failures += 1
                failed.append(Failure(g, *g.explain(_try_load(g.source, L, G, C, B))))
        if not failed:
            raised = self._line_failures[-1]
            if self.check(L, G, C, B) is None:
                if self._line_failures[-1] > raised:  # the check itself raised
                    failed.append(Failure(None, "every guard holds alone; the check raised"
                                          " reading a source (two sources under one name?)",
                                          "an exception"))
                else:
                    failed.append(Failure(None, "a tensor's dispatch keys as traced (C++"
                                          " tensor check; e.g. inference mode)",
                                          "different dispatch keys"))
        return failed

    def changed_sizes(self, L, G, C, B) -> dict:
        """Slow path: {source: dims} of tensors whose static sizes alone changed."""
        changed = {}
        for g in self.guards:
            if g.kind == TENSOR_MATCH:
                dims = changed_dims(g, _try_load(g.source, L, G, C, B))
                if dims:
                    changed[g.source.name()] = dims
        return changed


@dataclass(frozen=True)
class Failure:
    """A guard that failed for one call: what it expected and what it found."""

    guard: Optional[Guard]
    expected: str  # `L['x'].shape[0] == 8`
    actual: str  # `9`

    def __str__(self):
        return f"{self.expected} (actual: {self.actual})"


def _single(g: Guard):
    """The check of `g` alone (Python tensor check), compiled once per guard."""
    fn = g.__dict__.get("_single")
    if fn is None:
        fn = g.__dict__["_single"] = GuardSet([g], [], examples=None).check
    return fn


_CLOCK = []


def _clock_cost_ns() -> int:
    """What one clock read adds to a measured interval (measured once)."""
    if not _CLOCK:
        now = time.perf_counter_ns
        start = now()
        for _ in range(1000):
            now()
        _CLOCK.append((now() - start) // 1000)
    return _CLOCK[0]


def _try_load(source: Optional[Source], L, G, C, B):
    if source is None:
        return None
    cg = _Codegen()
    var = cg.load(source)
    text = "def load(L, G, C, B):\n    try:\n" + "".join(
        f"        {line[1]}\n" for line in cg.lines) + f"        return {var}\n"
    text += "    except Exception:\n        return None\n"
    namespace = dict(cg.namespace)  # the slow path may use globals
    exec(compile(text, "<refcomp guard load>", "exec"), namespace)
    return namespace["load"](L, G, C, B)
