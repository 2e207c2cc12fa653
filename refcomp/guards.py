"""Guards: the facts a trace relied on, compiled into one generated Python function.

Owns: guard kinds (CAPS, after torch._dynamo), `Guard`, readable descriptions and
`GuardSet`, which generates one check function per set and a slow path naming
each failing guard.  Must not know bytecode.  Spec: spec/guards.md.

The generated function `check(L, G, C, B)` (locals, globals, closure cells,
builtins) returns the tuple of graph-input tensors when every guard holds and
None otherwise: guarding and argument extraction are one pass.

Note [Fast tensor checks]: a tensor fact costs ~1-2 us in Python (dtype, shape,
stride(), device, requires_grad are each a C getter plus a comparison), which
dominates a module's guards.  When torch provides its C++ `TensorGuards` checker,
the set checks every tensor in one call (built from the example tensors of the
trace, with the expected sizes and strides given explicitly); the slow path that
names failures stays in Python, so the readable reasons do not depend on it.

Note [Names are data]: user strings (local, global and attribute names, dict
keys) never appear in generated source; they are constants bound in the
function's namespace (`_k0`, `_k1`...).  Expected values (dtypes, shapes, ids) are
bound the same way.  Only fixed, refcomp-written text becomes code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from refcomp.sources import Source

TENSOR_MATCH = "TENSOR_MATCH"  # type, dtype, device, shape, strides, requires_grad
ID_MATCH = "ID_MATCH"  # the very same object (modules, functions, globals)
EQUALS_MATCH = "EQUALS_MATCH"  # type and value of a constant (int, float, str, None...)
TYPE_MATCH = "TYPE_MATCH"  # exact type (objects whose attributes are guarded one by one)
LENGTH_CHECK = "LENGTH_CHECK"  # type and length of a list/tuple
DICT_KEYS = "DICT_KEYS"  # type and key order of a dict
GRAD_MODE = "GRAD_MODE"  # torch.is_grad_enabled()
DEFAULT_DTYPE = "DEFAULT_DTYPE"  # torch.get_default_dtype()
NO_ALIASING = "NO_ALIASING"  # tensors that the graph mutates share no storage
SHAPE_ENV = "SHAPE_ENV"  # dynamic sizes: equalities (duck sizing), >= 2, decided relations
TENSOR_VERSION = "TENSOR_VERSION"  # a frozen tensor: same object, not modified in place
TIME_EVERY = 64  # guard checks per timed one (See Note [Sampled guard time])
GUARD_KINDS = (TENSOR_MATCH, ID_MATCH, EQUALS_MATCH, TYPE_MATCH, LENGTH_CHECK, DICT_KEYS,
               GRAD_MODE, DEFAULT_DTYPE, NO_ALIASING, SHAPE_ENV, TENSOR_VERSION)


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


@dataclass
class Guard:
    """One fact.  `source` is None for global-state guards; `expected` is plain data."""

    kind: str
    source: Optional[Source]
    expected: Any
    sources: tuple = ()  # NO_ALIASING: the tensors that must not overlap
    failures: int = 0

    @property
    def name(self) -> str:
        return self.source.name() if self.source is not None else "<global state>"

    def describe(self) -> str:
        s, e = self.name, self.expected
        if self.kind == TENSOR_MATCH:
            return (f"{s}: {e.type.__name__} {e.dtype} on {e.device}, shape {list(e.shape)},"
                    f" stride {list(e.stride)}, requires_grad={e.requires_grad}")
        if self.kind == ID_MATCH:
            return f"{s} is the same object ({e[1]})"
        if self.kind == EQUALS_MATCH:
            return f"{s} == {e!r}"
        if self.kind == TYPE_MATCH:
            return f"type({s}) is {e.__qualname__}"
        if self.kind == LENGTH_CHECK:
            return f"type({s}) is {e[0].__name__} and len({s}) == {e[1]}"
        if self.kind == DICT_KEYS:
            return f"list({s}.keys()) == {list(e)!r}"
        if self.kind == GRAD_MODE:
            return f"torch.is_grad_enabled() == {e}"
        if self.kind == DEFAULT_DTYPE:
            return f"torch.get_default_dtype() == {e}"
        if self.kind == NO_ALIASING:
            return "no storage shared among " + ", ".join(x.name() for x in self.sources)
        if self.kind == SHAPE_ENV:
            return e[0]
        if self.kind == TENSOR_VERSION:
            return f"{s} is the frozen tensor and {s}._version == {e[1]}"
        return f"{self.kind} {s}"

    def failure_reason(self, value) -> str:
        """Why this guard fails for `value` (readable, like `L['x'].shape[0] == 8`)."""
        s, e = self.name, self.expected
        if self.kind == TENSOR_VERSION:
            if id(value) != e[0]:
                return f"{s} is the frozen tensor (it was replaced)"
            return f"{s}._version == {e[1]}"
        if self.kind != TENSOR_MATCH:
            return self.describe()
        if type(value) is not e.type:
            return f"type({s}) is {e.type.__name__}"
        if value.dtype != e.dtype:
            return f"{s}.dtype == {e.dtype}"
        if value.device != e.device:
            return f"{s}.device == {e.device}"
        if value.dim() != len(e.shape):
            return f"{s}.dim() == {len(e.shape)}"
        for i, (got, want) in enumerate(zip(value.shape, e.shape)):
            if want is not None and got != want:
                return f"{s}.shape[{i}] == {want}"
        if None in e.shape and not value.is_contiguous():
            return f"{s}.is_contiguous()"
        if any(w is not None and got != w for got, w in zip(value.stride(), e.stride)):
            return f"{s}.stride() == {e.stride}"
        return f"{s}.requires_grad == {e.requires_grad}"

    def changed_dims(self, value) -> tuple:
        """TENSOR_MATCH: the static dims whose size alone differs in `value` (same type,
        dtype, device and rank); what automatic dynamic makes symbolic.  Else ()."""
        e = self.expected
        if (self.kind != TENSOR_MATCH or type(value) is not e.type or value.dtype != e.dtype
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
    """Builds the text of one check function; see Note [Names are data]."""

    def __init__(self):
        self.namespace: dict = {"_id": id, "_type": type}
        self.lines: list[str] = []
        self.loaded: dict = {}  # source name -> local variable

    def const(self, value) -> str:
        name = f"_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def load(self, source: Source) -> str:
        key = source.name()
        if key not in self.loaded:
            expr = source.expr(self)
            var = f"v{len(self.loaded)}"
            self.lines.append(f"{var} = {expr}")
            self.loaded[key] = var
        return self.loaded[key]

    def require(self, condition: str) -> None:
        self.lines.append(f"if not ({condition}): return None")


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
                _emit(cg, g)
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
        cg.require(f"{cg.const(checker.check)}({', '.join(loaded)})")
        for v, g in zip(loaded, tensor_guards):
            if None in g.expected.stride:  # unchecked strides: contiguity pins them
                cg.require(f"{v}.is_contiguous()")
        return
    for v, g in zip(loaded, tensor_guards):
        _emit(cg, g)


def _emit(cg: _Codegen, g: Guard) -> None:
    e = g.expected
    if g.kind == GRAD_MODE:
        cg.require(f"{cg.const(torch.is_grad_enabled)}() is {cg.const(e)}")
        return
    if g.kind == DEFAULT_DTYPE:
        cg.require(f"{cg.const(torch.get_default_dtype)}() is {cg.const(e)}")
        return
    if g.kind == SHAPE_ENV:
        # e = (text, callable over sizes, [(source, dim) per size argument])
        sizes = [f"{cg.load(src)}.shape[{dim}]" for src, dim in e[2]]
        cg.require(f"{cg.const(e[1])}({', '.join(sizes)})")
        return
    if g.kind == NO_ALIASING:
        ptrs = [f"{cg.load(s)}.untyped_storage().data_ptr()" for s in g.sources]
        cg.require(f"len({{{', '.join(ptrs)}}}) == {len(ptrs)}")
        return
    v = cg.load(g.source)
    if g.kind == TENSOR_MATCH:
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
        cg.require(" and ".join(conds))
    elif g.kind == ID_MATCH:
        cg.require(f"_id({v}) == {cg.const(e[0])}")
    elif g.kind == TENSOR_VERSION:  # bumped by every in-place op (optimizer.step(), copy_)
        cg.require(f"_id({v}) == {cg.const(e[0])} and {v}._version == {cg.const(e[1])}")
    elif g.kind == EQUALS_MATCH:
        cg.require(f"_type({v}) is {cg.const(type(e))} and {v} == {cg.const(e)}")
    elif g.kind == TYPE_MATCH:
        cg.require(f"_type({v}) is {cg.const(e)}")
    elif g.kind == LENGTH_CHECK:
        cg.require(f"_type({v}) is {cg.const(e[0])} and len({v}) == {cg.const(e[1])}")
    elif g.kind == DICT_KEYS:
        cg.require(f"_type({v}) is dict and list({v}) == {cg.const(list(e))}")
    else:
        raise ValueError(f"unknown guard kind {g.kind!r}")


@dataclass
class GuardSet:
    """The guards of one cache entry, compiled to `check(L, G, C, B) -> inputs | None`."""

    guards: list
    input_sources: list  # sources of the graph inputs, in graph-input order
    source_code: str = ""
    check: Any = None
    time_ns: int = 0  # summed over the timed checks (See Note [Sampled guard time])
    timed: int = 0
    calls: int = 0
    stats: dict = field(default_factory=dict)

    examples: Any = None  # the tensors the trace saw, in TENSOR_MATCH order (not kept)

    def __post_init__(self):
        cg = _Codegen()
        tensor_guards = [g for g in self.guards if g.kind == TENSOR_MATCH]
        for g in self.guards:
            if g.kind != TENSOR_MATCH:
                _emit(cg, g)
        _emit_tensors(cg, tensor_guards, self.examples)
        self.examples = None
        outs = [cg.load(s) for s in self.input_sources]
        body = cg.lines + [f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"]
        # Constants are the closure of `check` (LOAD_DEREF), cheaper than globals.
        names = sorted(cg.namespace)
        text = f"def make({', '.join(names)}):\n    def check(L, G, C, B):\n        try:\n"
        text += "".join(f"            {line}\n" for line in body)
        text += "        except Exception:\n            return None\n    return check\n"
        self.source_code = text
        namespace: dict = {}
        exec(compile(text, "<refcomp guards>", "exec"), namespace)
        self.check = namespace["make"](*(cg.namespace[n] for n in names))

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
        return out

    def failures(self, L, G, C, B) -> list[str]:
        """Slow path: every failing guard, described readably; counts each failure."""
        failed = []
        for g in self.guards:
            single = GuardSet([g], [], examples=None)
            if single.check(L, G, C, B) is None:
                g.failures += 1
                failed.append(g.failure_reason(_try_load(g.source, L, G, C, B)))
        if not failed and self.check(L, G, C, B) is None:
            failed.append("a tensor's dispatch keys differ (C++ tensor check; e.g. inference"
                          " mode)")
        return failed

    def changed_sizes(self, L, G, C, B) -> dict:
        """Slow path: {source: dims} of tensors whose static sizes alone changed."""
        changed = {}
        for g in self.guards:
            if g.kind == TENSOR_MATCH:
                dims = g.changed_dims(_try_load(g.source, L, G, C, B))
                if dims:
                    changed[g.source.name()] = dims
        return changed


def _try_load(source: Optional[Source], L, G, C, B):
    if source is None:
        return None
    cg = _Codegen()
    var = cg.load(source)
    text = "def load(L, G, C, B):\n    try:\n" + "".join(
        f"        {line}\n" for line in cg.lines) + f"        return {var}\n"
    text += "    except Exception:\n        return None\n"
    namespace = dict(cg.namespace)  # the slow path may use globals
    exec(compile(text, "<refcomp guard load>", "exec"), namespace)
    return namespace["load"](L, G, C, B)
