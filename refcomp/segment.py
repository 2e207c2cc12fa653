"""Tracing one segment: from any instruction, with real locals and stack, to a break.

Owns: `SegmentTranslator` (the tracer started at an instruction, wrapping real
values lazily, stopping before a given instruction, turning uses of opaque values
and failed handlers into breaks), `trace_segment` and `Segment` (what happens after
a segment's graph).  Must not know how segments are chained (refcomp/resume.py).
Spec: spec/runtime.md.

Note [Retrace to the break]: a handler may pop operands or mutate symbolic values
before it raises, and a break inside an inlined callee leaves the callee half
traced.  So the state at a break is never taken from the failed trace: the segment
is traced again, from scratch, and stopped *before* the breaking instruction of the
compiled frame (its index and how many times it had been reached, for unrolled
loops).  Tracing is deterministic, so the second trace is the first one's prefix.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from refcomp.concrete import GRAD_CONTEXTS
from refcomp.concrete import NULL as REAL_NULL
from refcomp.guards import TYPE_MATCH
from refcomp.reasons import Unsupported
from refcomp.recipes import GradExit, OpaqueVar, Recipes, Refused
from refcomp.runtime import Entry, build_entry, make_guard_set
from refcomp.side_effects import mutated_containers, stored_names
from refcomp.sources import AttrSource, ClosureSource, LocalSource
from refcomp.tracer.context import TraceContext
from refcomp.tracer.frame import InstructionTranslator, _Return
from refcomp.tracer.values import (
    NULL,
    CellVar,
    DictVar,
    ExitVar,
    IteratorVar,
    ListVar,
    MethodVar,
    TensorVar,
    TupleVar,
)


class _Stop(Exception):
    """The segment trace reached its stop instruction (Note [Retrace to the break])."""


def stack_name(i: int) -> str:
    return f"stack[{i}]"  # not an identifier, so never a real local's name


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
        if isinstance(value, types.MethodType) and value.__name__ == "__exit__" and \
                type(value.__self__) in GRAD_CONTEXTS:
            # The `__exit__` a break left inside `with torch.no_grad():` restores `prev`.
            owner = AttrSource(source, "__self__")
            self.ctx.add_guard(TYPE_MATCH, owner, type(value.__self__))
            return ExitVar(self.ctx.wrap(value.__self__.prev, AttrSource(owner, "prev")).value)
        if type(value) is GradExit:  # the same, rebuilt after an earlier break
            self.ctx.add_guard(TYPE_MATCH, source, GradExit)
            return ExitVar(self.ctx.wrap(value.previous, AttrSource(source, "previous")).value)
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

    def step(self):
        """One instruction, stopping at `stop` and recording where the frame breaks."""
        index = self.ip
        visit = self.visits[index] = self.visits.get(index, 0) + 1
        if self.stop == (index, visit):
            raise _Stop()
        try:
            super().step()
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
    grad_mode: Optional[bool] = None  # the grad mode after the graph, where it changed
    run_with_grad: bool = False  # see Note [Leaving no_grad inside a segment]


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
        segment.grad_mode = ctx.grad_enabled  # e.g. the break is inside a no_grad block
    recipes = Recipes(ctx)
    if segment.kind == "return":
        segment.result = recipes.of(output)
    else:
        segment.locals = {name: recipes.of(vt) for name, vt in tx.locals.items()}
        for name in tx.pending:
            segment.locals[name] = ("source", LocalSource(name))
        segment.stack = [recipes.of(vt) for vt in tx.stack]
    recipes.check_aliasing()
    # Note [Leaving no_grad inside a segment]: the runtime runs a graph in the grad mode
    # of the call and detaches the outputs eager would not attach.  A segment that starts
    # inside `no_grad` and leaves it has outputs that need autograd, so its graph runs
    # with grad enabled (values from inside the block cannot feed them: RB011).
    entry_mode = ctx.guards[("GRAD_MODE", None)].expected
    segment.run_with_grad = not entry_mode and any(t.requires_grad for t in recipes.tensors)
    guards = cf._filter(ctx.finish_guards())
    if recipes.tensors or ctx.mutated:
        entry = build_entry(ctx, TupleVar(recipes.tensors), cf.backend, cf.options, guards)
    else:
        entry = Entry(make_guard_set(ctx, guards, []), backend=cf.backend)
    entry.segment = segment
    entry.reason = reason
    entry.refs_to_hold = tuple(ctx.id_objects)
    return entry
