"""Graph breaks with resume: the state machine that runs a frame as compiled segments.

Owns: `compile_with_breaks` (a frame whose whole-frame trace failed becomes a first
segment that ends at the breaking instruction), `run` (the state machine: run a
segment's graph, rebuild the frame's locals and value stack as real objects,
execute the breaking instruction concretely, step the cheap instructions after it,
then continue with the cache entry of the resume point), resume points and their
caches, and callees compiled as frames of their own.  Tracing a segment is
refcomp/segment.py; rebuilding values, refcomp/recipes.py; executing instructions,
refcomp/concrete.py.  Spec: spec/runtime.md.

Note [Resume points]: a resume point is (instruction index, which live tensors are
the same object).  Its entries sit in a FrameCache of their own, hung on the
frame's cache (`resume_points`), and are guarded like any entry: the guards read
`L`, a dict of the live locals plus the value stack as `L['stack[i]']`.  Values
are wrapped lazily (a local nobody reads is never guarded), and tensors held twice
are one graph input, which is why object identity is part of the key.
"""

from __future__ import annotations

import functools
import sys
import time
import types
from typing import Optional

import torch

from refcomp import concrete, logs
from refcomp.cache import COUNTERS, FrameCache
from refcomp.concrete import CONCRETE_OPS, HANDLER_OPS, Frame, Returned
from refcomp.concrete import NULL as REAL_NULL
from refcomp.guards import EQUALS_MATCH, GuardSet
from refcomp.recipes import make
from refcomp.runtime import Entry
from refcomp.segment import Segment, stack_name, trace_segment
from refcomp.side_effects import stored_names
from refcomp.sources import LocalSource


def resumable(code) -> bool:
    """Frames whose every instruction the concrete machine can execute, without cells.

    `with` blocks are admitted only as `with torch.no_grad():` / `torch.enable_grad()`
    (their handlers only restore the grad mode, which `run` does on an exception), and
    then only in frames that never call set_grad_enabled.
    """
    if code.co_cellvars:
        return False
    insts, _ = concrete.instructions(code)
    for i, inst in enumerate(insts):
        if inst.opname == "BEFORE_WITH" and (not _grad_with(insts, i)
                                             or "set_grad_enabled" in code.co_names):
            return False
        if inst.opname not in CONCRETE_OPS and inst.opname not in HANDLER_OPS:
            return False
    return True


def _grad_with(insts, i) -> bool:
    """Is instruction i the BEFORE_WITH of `with torch.no_grad():` or `torch.enable_grad()`?"""
    ops = [(x.opname, x.argval) for x in insts[max(i - 4, 0):i]]
    return len(ops) == 4 and ops[0] == ("LOAD_GLOBAL", "torch") and \
        ops[1][0] in ("LOAD_ATTR", "LOAD_METHOD") and ops[1][1] in ("no_grad", "enable_grad") \
        and ops[2][0] == "PRECALL" and ops[3] == ("CALL", 0)


def compile_with_breaks(cf, L, reason) -> Optional[Entry]:
    """The first segment of a frame whose whole-frame trace failed, or None (run eagerly)."""
    if not resumable(cf.code):
        return None
    start = time.perf_counter()
    G, C, B = cf.fn.__globals__, cf.fn.__closure__, cf.builtins
    try:
        entry = trace_segment(cf, G, B, C, 0, L, [], root=True)
    except Exception:  # Unsupported, Refused or a tracer bug: the whole frame runs eagerly
        return None
    if entry.guards.check(L, G, C, B) is None:
        return None
    COUNTERS["segments"] += 1
    entry.compile_time_s = time.perf_counter() - start
    return entry


def run(entry, inputs, L, G, C, B, cf):
    """Run a frame from a segment entry to its return (See spec/runtime.md)."""
    if "BEFORE_WITH" not in {i.opname for i in concrete.instructions(cf.code)[0]}:
        return _run(entry, inputs, L, G, C, B, cf)
    grad_on_entry = torch.is_grad_enabled()
    try:
        return _run(entry, inputs, L, G, C, B, cf)
    except BaseException:
        # The frame's `with torch.no_grad()` blocks would restore the mode on the way
        # out (resumable() admits no other `with`, and no set_grad_enabled call).
        torch.set_grad_enabled(grad_on_entry)
        raise


def _run(entry, inputs, L, G, C, B, cf):
    code = cf.code
    stored = stored_names(code)
    while True:
        segment = entry.segment
        if entry.graph is None:
            outs = ()
        elif segment.run_with_grad:  # See Note [Leaving no_grad inside a segment]
            with torch.enable_grad():
                outs = entry.run(inputs)
        else:
            outs = entry.run(inputs)
        if segment.grad_mode is not None:  # the segment entered or left a no_grad block
            torch.set_grad_enabled(segment.grad_mode)
        memo: dict = {}
        if segment.kind == "return":
            return make(segment.result, outs, L, G, C, B, memo)
        fr = Frame(code, G, B, C, {n: make(r, outs, L, G, C, B, memo)
                                   for n, r in segment.locals.items()},
                   [make(r, outs, L, G, C, B, memo) for r in segment.stack], segment.index,
                   segment.kw_names)
        if segment.callee:
            _compile_callee(cf, fr)
        try:
            concrete.execute(fr, fr.insts[fr.index])
            concrete.step(fr, *stored)
        except Returned as r:
            return r.value
        L = {name: fr.locals[name] for name in sorted(fr.locals)}
        L.update((stack_name(i), v) for i, v in enumerate(fr.stack))
        entry, inputs = _resume_entry(cf, fr, L, G, C, B)


class ResumePoint(FrameCache):
    """The entries of one resume point, and the names whose numbers are not specialized."""

    def __init__(self, code, index):
        super().__init__(code)
        self.index = index
        self.opaque: frozenset = frozenset()

    def widen(self, L) -> bool:
        """Note [Opaque numbers]: a number guarded by value that changed becomes opaque."""
        changed = set()
        for entry in self.entries:
            for g in entry.guards.guards:
                if g.kind == EQUALS_MATCH and isinstance(g.source, LocalSource) and \
                        type(g.expected) in (int, float) and \
                        type(L.get(g.source.local)) is type(g.expected) and \
                        L[g.source.local] != g.expected:
                    changed.add(g.source.local)
        if not changed - self.opaque:
            return False
        self.opaque = self.opaque | changed
        self.entries = []  # superseded: the widened entry covers what they covered
        return True


def _compile_callee(cf, fr) -> None:
    """Replace the callable of the CALL about to run by its compiled frame.

    The break was inside a user function the tracer had inlined: rather than run
    all of it eagerly, the function is compiled as a frame of its own (with its own
    graphs and breaks), cached on the caller's cache under its code object.
    """
    n = fr.insts[fr.index].arg
    at = len(fr.stack) - n - 2 if fr.stack[-n - 2] is not REAL_NULL else len(fr.stack) - n - 1
    target = fr.stack[at]
    bound = None
    if isinstance(target, types.MethodType) and isinstance(target.__func__,
                                                           types.FunctionType):
        bound, fn = target.__self__, target.__func__
    elif isinstance(target, types.FunctionType):
        fn = target
    elif isinstance(target, torch.nn.Module) and not _has_hooks(target) and \
            isinstance(type(target).forward, types.FunctionType) and \
            not type(target).__module__.startswith("torch."):
        bound, fn = target, type(target).forward
    else:
        return
    package = (getattr(fn, "__module__", None) or "").split(".")[0]
    if package in sys.stdlib_module_names or package == "torch":
        return  # library code (logging, ...) runs eagerly, as torch.compile's skipfiles
    callees = callee_functions(cf.cache)
    compiled = callees.get(fn)
    if compiled is None:
        from refcomp.api import CompiledFunction

        compiled = callees.setdefault(fn, CompiledFunction(
            fn, cf.backend, False, cf.options, private_cache=cf.private is not None))
    fr.stack[at] = compiled if bound is None else functools.partial(compiled, bound)


def _has_hooks(m) -> bool:
    from torch.nn.modules import module as mm

    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or m._backward_pre_hooks or mm._global_forward_hooks
                or mm._global_forward_pre_hooks or mm._global_backward_hooks)


def callee_functions(cache: FrameCache) -> dict:
    """function -> its CompiledFunction, for breaks inside inlined callees."""
    callees = cache.__dict__.get("callees")
    if callees is None:
        with cache.lock:
            callees = cache.__dict__.setdefault("callees", {})
    return callees


def resume_points(cache: FrameCache) -> dict:
    """(index, identity key) -> FrameCache of that resume point (Note [Resume points])."""
    points = cache.__dict__.get("resume_points")
    if points is None:
        with cache.lock:
            points = cache.__dict__.setdefault("resume_points", {})
    return points


def all_entries(cache: FrameCache, _seen=None) -> list:
    """The frame's entries, every resume point's, and callees compiled at breaks."""
    seen = _seen if _seen is not None else set()
    seen.add(id(cache))
    out = list(cache.entries)
    for point in list(resume_points(cache).values()):
        out.extend(point.entries)
    for compiled in list(callee_functions(cache).values()):
        if id(compiled.cache) not in seen:  # (mutual) recursion shares caches
            out.extend(all_entries(compiled.cache, seen))
    return out


def _identity_key(L) -> tuple:
    groups: dict = {}
    return tuple((name, groups.setdefault(id(v), len(groups))) for name, v in L.items()
                 if isinstance(v, torch.Tensor))


def _resume_entry(cf, fr, L, G, C, B):
    points = resume_points(cf.cache)
    key = (fr.index, _identity_key(L))
    point = points.get(key)
    if point is None:
        with cf.cache.lock:
            point = points.setdefault(key, ResumePoint(cf.code, fr.index))
    entry, inputs = point.lookup(L, G, C, B)
    if entry is not None:
        return entry, inputs
    with point.lock:
        entry, inputs = point.lookup(L, G, C, B)
        if entry is None:
            entry, inputs = _compile_resume(cf, point, fr, L, G, C, B)
    return entry, inputs


def _compile_resume(cf, point, fr, L, G, C, B):
    COUNTERS["resume_compiles"] += 1
    start = time.perf_counter()
    logs.recompile(point, cf.options["cache_size_limit"], (L, G, C, B))
    point.widen(L)
    if len(point.entries) >= cf.options["cache_size_limit"]:
        return _eager_step(fr, "cache_size_limit reached"), ()
    try:
        entry = trace_segment(cf, G, B, C, fr.index, fr.locals, fr.stack, root=False,
                              opaque=point.opaque)
    except Exception as err:  # the resume point must progress: run its instruction eagerly
        entry = _eager_step(fr, f"{type(err).__name__}: {err}")
    inputs = entry.guards.check(L, G, C, B)
    if inputs is None:
        entry = _eager_step(fr, "guards fail right after tracing (aliased inputs)")
        inputs = ()
    entry.compile_time_s = time.perf_counter() - start
    point.add(entry)
    return entry, inputs


def _eager_step(fr, why) -> Entry:
    """An entry that runs the resume point's instruction concretely (always correct)."""
    segment = Segment("break", fr.index, fr.kw_names,
                      {n: ("source", LocalSource(n)) for n in fr.locals},
                      [("source", LocalSource(stack_name(i))) for i in range(len(fr.stack))])
    inst = fr.insts[fr.index]
    entry = Entry(GuardSet([], []), notes=[f"resume point at offset {inst.offset}"
                                            f" ({inst.opname}) runs eagerly: {why}"])
    entry.segment = segment
    return entry
