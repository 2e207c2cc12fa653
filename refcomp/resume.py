"""Graph breaks with resume: the state machine that runs a frame as compiled segments.

Owns: `compile_with_breaks` (a frame whose whole-frame trace failed becomes a first
segment that ends at the breaking instruction), `run` (the state machine: run a
segment's graph, rebuild the frame's locals and value stack as real objects,
execute the breaking instruction concretely, step the cheap instructions after it,
then continue with the cache entry of the resume point), the `SegmentTranslator`
(the tracer, started at any instruction with real locals and stack, stopping before
a given instruction) and the recipes that rebuild live values after a graph.
Must not know the IR's passes or backends (it calls refcomp.runtime.build_entry).
Spec: spec/runtime.md.

Note [Retrace to the break]: a handler may pop operands or mutate symbolic values
before it raises, and a break inside an inlined callee leaves the callee half
traced.  So the state at a break is never taken from the failed trace: the segment
is traced again, from scratch, and stopped *before* the breaking instruction of the
compiled frame (its index and how many times it had been reached, for unrolled
loops).  Tracing is deterministic, so the second trace is the first one's prefix.

Note [Opaque numbers]: a Python number live at a resume point (a running total, a
value read by `.item()`) is first specialized like any constant.  When a later
call misses only because such a number changed, the resume point re-traces with
that name opaque (`OpaqueVar`: its type is guarded, its value is not) and drops the
specialized entries, so a loop does not recompile per value.  The tracer can only
move an opaque value; an instruction that needs it (arithmetic, a jump, a call
argument) fails and becomes a break executed concretely.  Any other failure of a
handler inside a segment is turned into such a break too: running one instruction
concretely is always what eager does.

Note [Resume points]: a resume point is (instruction index, which live tensors are
the same object).  Its entries sit in a FrameCache of their own, hung on the
frame's cache (`resume_points`), and are guarded like any entry: the guards read
`L`, a dict of the live locals plus the value stack as `L['stack[i]']`.  Values
are wrapped lazily (a local nobody reads is never guarded), and tensors held twice
are one graph input, which is why object identity is part of the key.
"""

from __future__ import annotations

import copy
import functools
import sys
import time
import types
from dataclasses import dataclass, field
from typing import Any, Optional

import sympy
import torch

from refcomp import concrete
from refcomp.cache import COUNTERS, FrameCache
from refcomp.concrete import CONCRETE_OPS, Frame, Returned
from refcomp.concrete import NULL as REAL_NULL
from refcomp.guards import EQUALS_MATCH, TYPE_MATCH, GuardSet
from refcomp.reasons import Unsupported
from refcomp.runtime import Entry, build_entry, make_guard_set
from refcomp.side_effects import mutated_containers, stored_names
from refcomp.sources import (
    ATTR,
    AttrSource,
    BuiltinSource,
    ClosureSource,
    GlobalSource,
    ItemSource,
    LocalSource,
)
from refcomp.tracer.context import CONSTANT_TYPES, TraceContext
from refcomp.tracer.frame import InstructionTranslator, _line_of, _Return
from refcomp.tracer.values import (
    NULL,
    VT,
    CellVar,
    ConstVar,
    DictVar,
    IteratorVar,
    ListVar,
    MethodVar,
    TensorVar,
    TupleVar,
)


class OpaqueVar(VT):
    """A Python number that changed between calls at a resume point (Note [Opaque numbers]).

    The tracer only moves it around: any handler that needs its value fails, and the
    instruction becomes a break that runs concretely.  Only its exact type is guarded.
    """

    def __init__(self, value, source):
        self.kind = type(value)
        self.source = source

    def python_type(self):
        return self.kind

    def __repr__(self):
        return f"OpaqueVar({self.source.name()})"


class _Stop(Exception):
    """The segment trace reached its stop instruction (Note [Retrace to the break])."""


class Refused(Exception):
    """The state at a break cannot be rebuilt faithfully after the graph."""


def stack_name(i: int) -> str:
    return f"stack[{i}]"  # not an identifier, so never a real local's name


def resumable(code) -> bool:
    """Frames whose every instruction the concrete machine can execute, without cells."""
    if code.co_cellvars:
        return False
    insts, _ = concrete.instructions(code)
    return all(i.opname in CONCRETE_OPS for i in insts)


# --- tracing a segment ----------------------------------------------------------------------
class SegmentTranslator(InstructionTranslator):
    """The tracer for one segment: starts at `start` with real locals and stack."""

    def __init__(self, ctx, code, f_globals, f_builtins, cells, *, start, pending, stack,
                 stop=None, dedupe=False, opaque=frozenset()):
        super().__init__(ctx, code, f_globals, f_builtins, {}, cells)
        self.ip = start
        self.pending = dict(pending)  # real locals not read yet (wrapped on first read)
        self.dedupe = dedupe
        self.opaque = opaque  # names in L whose numbers are not specialized
        self.mutated_containers = mutated_containers(code)
        self.any_opaque = False
        self.by_id: dict = {}
        self.stop = stop
        self.visits: dict = {}
        self.break_at = None  # (index, visit) of the first failing instruction
        self.break_in_callee = False
        self.stored_globals, self.stored_attrs = stored_names(code)
        for i, value in enumerate(stack):
            self.stack.append(self.wrap_real(value, LocalSource(stack_name(i))))

    def wrap_real(self, value, source):
        if value is REAL_NULL:
            return NULL
        if source.local in self.opaque and type(value) in (int, float) or \
                type(value) in (list, dict) and self._mutated(source.local, value) or \
                isinstance(value, types.BuiltinMethodType) and \
                not isinstance(value.__self__, types.ModuleType):
            # A changing number, a container the frame mutates, or a builtin bound to an
            # object (`lst.append`, made anew each time): only their type is guarded.
            self.ctx.add_guard(TYPE_MATCH, source, type(value))
            self.any_opaque = True
            return OpaqueVar(value, source)
        if isinstance(value, types.MethodType) and isinstance(value.__func__,
                                                              types.FunctionType):
            # `obj.method` left on the stack by a break: guard the function, not the
            # bound method (a new object each time).
            self.ctx.wrap(value.__func__, AttrSource(source, "__func__"))
            return MethodVar(value.__func__,
                             self.wrap_real(value.__self__, AttrSource(source, "__self__")),
                             value.__func__.__name__)
        if self.dedupe and isinstance(value, torch.Tensor):
            vt = self.by_id.get(id(value))
            if vt is None:
                vt = self.by_id[id(value)] = self.ctx.wrap(value, source)
            else:
                self.ctx.objects[source.name()] = vt
            return vt
        return self.ctx.wrap(value, source)

    def _mutated(self, name, value) -> bool:
        """Is this list/dict one the frame mutates (Note [Mutated containers])?"""
        if name in self.mutated_containers:
            return True
        return name.startswith("stack[") and any(
            self.pending.get(n) is value for n in self.mutated_containers)

    def run(self):
        self.ctx.frames.append(self)
        try:
            while True:
                index = self.ip
                visit = self.visits[index] = self.visits.get(index, 0) + 1
                if self.stop == (index, visit):
                    raise _Stop()
                inst = self.instructions[index]
                self.current = inst
                self.ip += 1
                try:
                    handler = getattr(self, inst.opname, None)
                    if handler is None:
                        raise Unsupported("RB001", f"opcode {inst.opname}")
                    handler(inst)
                except Unsupported as err:
                    if self.break_at is None:
                        self.break_at = (index, visit)
                        self.break_in_callee = err.filename is not None  # located inside
                    raise
                except (_Return, _Stop):
                    raise
                except Exception as err:  # Note [Opaque numbers]: run it concretely instead
                    self.break_at = self.break_at or (index, visit)
                    rid = "RB020" if self.any_opaque else "RB018"
                    raise Unsupported(rid, f"{type(err).__name__}: {err}") from err
        except _Return as r:
            return r.value
        except Unsupported as e:
            e.locate(self.code.co_filename, _line_of(self.instructions, self.ip - 1),
                     f"{self.current.opname} {self.current.argrepr}".strip())
            raise
        finally:
            self.ctx.frames.pop()

    # Locals are read lazily: a local nobody reads installs no guard.
    def LOAD_FAST(self, inst):
        name = inst.argval
        if name not in self.locals and name in self.pending:
            self.locals[name] = self.wrap_real(self.pending.pop(name), LocalSource(name))
        super().LOAD_FAST(inst)

    def STORE_FAST(self, inst):
        self.pending.pop(inst.argval, None)
        super().STORE_FAST(inst)

    def DELETE_FAST(self, inst):
        self.pending.pop(inst.argval, None)
        super().DELETE_FAST(inst)

    # See Note [Reading what the frame writes] in refcomp/side_effects.py.
    def LOAD_GLOBAL(self, inst):
        if inst.argval in self.stored_globals:
            raise Unsupported("RB008", f"global {inst.argval!r} is assigned in this frame;"
                                       " it is read and updated outside the graph")
        super().LOAD_GLOBAL(inst)

    def LOAD_ATTR(self, inst):
        self._no_opaque(self.stack[-1], f"`.{inst.argval}` of")
        if inst.argval in self.stored_attrs and not isinstance(self.stack[-1], TensorVar):
            raise Unsupported("RB008", f"attribute {inst.argval!r} is assigned in this"
                                       " frame; it is read and updated outside the graph")
        super().LOAD_ATTR(inst)

    def _no_opaque(self, vt, what):
        if isinstance(vt, OpaqueVar):
            if vt.kind in (list, dict):
                raise Unsupported("RB008", f"{what} {vt.source.name()}, a {vt.kind.__name__}"
                                           " the frame mutates")
            if vt.kind in (int, float):
                raise Unsupported("RB020", f"{what} {vt.source.name()}")
            raise Unsupported("RB004", f"{what} {vt.source.name()}, a builtin method bound"
                                       " to a real object")

    def _no_opaque_deep(self, vts, what):
        todo = list(vts)
        while todo:
            vt = todo.pop()
            self._no_opaque(vt, what)
            if isinstance(vt, (TupleVar, ListVar)):
                todo.extend(vt.items)
            elif isinstance(vt, DictVar):
                todo.extend(vt.items.values())
            elif isinstance(vt, MethodVar):
                todo.append(vt.self_vt)

    # An opaque value never enters an inlined callee, whose handlers would not expect it.
    def CALL(self, inst):
        self._no_opaque_deep(self.stack[len(self.stack) - inst.arg - 2:], "a call with")
        super().CALL(inst)

    def CALL_FUNCTION_EX(self, inst):
        self._no_opaque_deep(self.stack[-4:], "a call with")
        super().CALL_FUNCTION_EX(inst)

    def LOAD_METHOD(self, inst):
        self._no_opaque(self.stack[-1], f"`.{inst.argval}` of")
        super().LOAD_METHOD(inst)

    def _jump_if(self, inst, predicate):
        self._no_opaque(self.stack[-1], "a jump on the truth of")
        super()._jump_if(inst, predicate)

    def JUMP_IF_TRUE_OR_POP(self, inst):
        self._no_opaque(self.stack[-1], "a jump on the truth of")
        super().JUMP_IF_TRUE_OR_POP(inst)

    def JUMP_IF_FALSE_OR_POP(self, inst):
        self._no_opaque(self.stack[-1], "a jump on the truth of")
        super().JUMP_IF_FALSE_OR_POP(inst)

    def UNARY_NOT(self, inst):
        self._no_opaque(self.stack[-1], "`not` of")
        super().UNARY_NOT(inst)

    def IS_OP(self, inst):
        self._no_opaque(self.stack[-1], "`is` on")
        self._no_opaque(self.stack[-2], "`is` on")
        super().IS_OP(inst)

    def FOR_ITER(self, inst):
        if not isinstance(self.stack[-1], IteratorVar):
            raise Unsupported("RB019", "the loop's iterator is a real object")
        super().FOR_ITER(inst)


def _cells(ctx, code, closure) -> dict:
    cells = {}
    for i, (name, cell) in enumerate(zip(code.co_freevars, closure or ())):
        try:
            contents = cell.cell_contents
        except ValueError:
            raise Unsupported("RB017", f"closure variable {name!r} is unbound") from None
        cells[name] = CellVar(ctx.wrap(contents, ClosureSource(i, name)))
        cells[name].real = True
    return cells


@dataclass
class Segment:
    """What happens after a segment's graph: rebuild the state, then break or return."""

    kind: str  # "break": execute instruction `index` concretely; "return": return `result`
    index: int = 0
    kw_names: tuple = ()
    locals: dict = field(default_factory=dict)  # name -> recipe
    stack: list = field(default_factory=list)  # recipes, bottom first
    result: Any = None  # recipe of the return value
    callee: bool = False  # the break is inside the function this CALL inlined


def trace_segment(cf, G, B, C, start, pending, stack, *, root, opaque=frozenset()) -> Entry:
    """Trace from instruction `start`; the entry ends at a return or at the first break.

    Raises Unsupported when the segment fails before reaching any instruction (the
    frame itself is unsupported), Refused when the state at the break cannot cross it.
    """
    code = cf.code

    def fresh(stop):
        # `dynamic` only where set (a symbolic size crossing a break: see _Recipes._size).
        ctx = TraceContext(code.co_name, **({"dynamic": True} if getattr(cf, "dynamic", False)
                                            else {}))
        tx = SegmentTranslator(ctx, code, G, B, _cells(ctx, code, C), start=start,
                               pending=pending, stack=stack, stop=stop, dedupe=not root,
                               opaque=opaque)
        return ctx, tx

    ctx, tx = fresh(None)
    try:
        output = tx.run()
        return _build(cf, ctx, tx, Segment("return"), output, None)
    except Unsupported as err:
        if tx.break_at is None:
            raise
        reason = err
    callee = tx.break_in_callee
    ctx, tx = fresh(tx.break_at)
    try:
        tx.run()
        raise Refused("the second trace did not reach the break")
    except _Stop:
        pass
    except Unsupported as err:
        raise Refused(f"the second trace failed earlier: {err}") from None
    segment = Segment("break", tx.ip, tx.kw_names,
                      callee=callee and tx.instructions[tx.ip].opname == "CALL")
    return _build(cf, ctx, tx, segment, None, reason)


def _build(cf, ctx, tx, segment, output, reason) -> Entry:
    if ctx.used_grad_toggle:
        raise Refused("grad mode changes inside the segment")
    recipes = _Recipes(ctx)
    if segment.kind == "return":
        segment.result = recipes.of(output)
    else:
        segment.locals = {name: recipes.of(vt) for name, vt in tx.locals.items()}
        for name in tx.pending:
            segment.locals[name] = ("source", LocalSource(name))
        segment.stack = [recipes.of(vt) for vt in tx.stack]
    recipes.check_aliasing()
    guards = cf._filter(ctx.finish_guards())
    if recipes.tensors or ctx.mutated:
        entry = build_entry(ctx, TupleVar(recipes.tensors), cf.backend, cf.options, guards)
    else:
        entry = Entry(make_guard_set(ctx, guards, []), backend=cf.backend)
    entry.segment = segment
    entry.reason = reason
    entry.refs_to_hold = tuple(ctx.id_objects)
    return entry


# --- rebuilding values after the graph -------------------------------------------------------
_IMMUTABLE = CONSTANT_TYPES + (torch.dtype, torch.device, torch.Size, range, slice, type,
                               types.FunctionType, types.BuiltinFunctionType, types.ModuleType,
                               types.MethodDescriptorType, types.WrapperDescriptorType,
                               types.MethodWrapperType, types.BuiltinMethodType)


def _immutable(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable(v) for v in value)
    return isinstance(value, _IMMUTABLE)


class _Recipes:
    """How each live symbolic value becomes a real object after the graph has run.

    Recipes: ("out", i) graph output i; ("source", s) re-read from the segment's
    L/G/C/B (inputs, and objects the trace only looked at: identity is kept);
    ("const", v) an immutable constant; ("copy", v) a fresh copy of a list/dict the
    trace built from constants; ("null",); containers and ("iter", items) of recipes;
    ("method", self recipe, function or None, name); ("shared", slot, recipe): a mutable
    object built once per rebuild, however many live values hold it; ("size", fn,
    [(tensor source, dim)]): a symbolic size, from this call's input shapes.
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.tensors: list = []
        self.index: dict = {}
        self.shared: dict = {}  # id(mutable VT) -> slot

    def of(self, vt):
        recipe = self._of(vt)
        if recipe[0] in ("copy", "list", "dict", "iter"):
            # Mutable: two names for one list must stay one list after the break.
            slot = self.shared.setdefault(id(vt), len(self.shared))
            return ("shared", slot, recipe)
        return recipe

    def _of(self, vt):
        if vt is NULL:
            return ("null",)
        if isinstance(vt, TensorVar):
            src = vt.source
            if src is not None and self.ctx.input_vars.get(src.name()) is vt:
                return ("source", src)  # the caller's tensor (written back if mutated)
            if id(vt) not in self.index:
                self.index[id(vt)] = len(self.tensors)
                self.tensors.append(vt)
            return ("out", self.index[id(vt)])
        if isinstance(vt, (ConstVar, TupleVar, ListVar, DictVar, OpaqueVar)) and \
                vt.source is not None:
            return ("source", vt.source)
        if isinstance(vt, ConstVar) and isinstance(vt.value, sympy.Basic):
            return self._size(vt.value)
        if isinstance(vt, ConstVar):
            if _immutable(vt.value):
                return ("const", vt.value)
            if type(vt.value) in (list, dict, set) and all(
                    _immutable(v) for v in (vt.value.items() if isinstance(vt.value, dict)
                                            else vt.value)):
                return ("copy", vt.value)
            raise Refused(f"a {type(vt.value).__name__} built while tracing")
        if isinstance(vt, TupleVar):
            return ("tuple", [self.of(i) for i in vt.items])
        if isinstance(vt, ListVar):
            return ("list", [self.of(i) for i in vt.items])
        if isinstance(vt, DictVar):
            return ("dict", [(k, self.of(v)) for k, v in vt.items.items()])
        if isinstance(vt, MethodVar):
            fn = vt.fn if isinstance(vt.fn, types.FunctionType) else None
            return ("method", self.of(vt.self_vt), fn, vt.name)
        if isinstance(vt, IteratorVar):
            return ("iter", [self.of(i) for i in vt.items[vt.pos:]])
        raise Refused(f"{type(vt).__name__} cannot cross a graph break")

    def _size(self, expr):
        """A symbolic size (dynamic=True): recomputed from the inputs' shapes after the graph."""
        if not expr.free_symbols:
            if expr.is_Integer:
                return ("const", int(expr))
            raise Refused(f"the size {expr} is not an integer")
        symbols = sorted(expr.free_symbols, key=str)
        where = [self.ctx.sym_sources[s][0] for s in symbols]  # (tensor source, dim)
        return ("size", sympy.lambdify(symbols, expr), where)

    def check_aliasing(self):
        """Graph outputs are fresh tensors: views of inputs or of each other would not be."""
        seen = {}
        for vt in self.tensors:
            if vt.alias in self.ctx.input_aliases:
                raise Refused("a view of an input tensor is live at the break")
            if vt.alias in seen:
                raise Refused("two live tensors share storage at the break")
            seen[vt.alias] = vt


def load_source(src, L, G, C, B):
    """The object a source names, read from a segment's L/G/C/B (as the guards read it)."""
    if isinstance(src, LocalSource):
        return L[src.local]
    if isinstance(src, GlobalSource):
        return G[src.glob]
    if isinstance(src, BuiltinSource):
        return B[src.builtin]
    if isinstance(src, ClosureSource):
        return C[src.index].cell_contents
    if isinstance(src, AttrSource):
        base = load_source(src.base_source, L, G, C, B)
        if src.where == ATTR:
            return getattr(base, src.attr)
        return getattr(base, src.where)[src.attr]
    if isinstance(src, ItemSource):
        return load_source(src.base_source, L, G, C, B)[src.key]
    if hasattr(src, "globals"):  # an inlined function's module globals
        return src.globals
    raise TypeError(f"cannot read source {src!r}")


def make(r, outs, L, G, C, B, memo):
    kind = r[0]
    if kind == "shared":  # one object however many live values hold it
        if r[1] not in memo:
            memo[r[1]] = make(r[2], outs, L, G, C, B, memo)
        return memo[r[1]]
    if kind == "out":
        return outs[r[1]]
    if kind == "source":
        return load_source(r[1], L, G, C, B)
    if kind == "const":
        return r[1]
    if kind == "size":
        return int(r[1](*(load_source(s, L, G, C, B).shape[d] for s, d in r[2])))
    if kind == "copy":
        return copy.deepcopy(r[1])
    if kind == "null":
        return REAL_NULL
    if kind == "tuple":
        return tuple(make(i, outs, L, G, C, B, memo) for i in r[1])
    if kind == "list":
        return [make(i, outs, L, G, C, B, memo) for i in r[1]]
    if kind == "dict":
        return {k: make(v, outs, L, G, C, B, memo) for k, v in r[1]}
    if kind == "iter":
        return iter([make(i, outs, L, G, C, B, memo) for i in r[1]])
    obj = make(r[1], outs, L, G, C, B, memo)  # "method"
    return types.MethodType(r[2], obj) if r[2] is not None else getattr(obj, r[3])


# --- the state machine -----------------------------------------------------------------------
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
    code = cf.code
    stored = stored_names(code)
    while True:
        segment = entry.segment
        outs = entry.run(inputs) if entry.graph is not None else ()
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
