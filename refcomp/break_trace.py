"""Tracing a compiled frame up to its graph break, and what crosses the break.

Owns: `FrameTranslator` (the tracer for a compiled frame: wraps its locals lazily,
treats values it must not look into as opaque, records where the frame breaks and
can stop before a given instruction), `trace_to_break` and `Break` (the recipes of
the stack, locals and cells that the generated code receives after the graph).
Must not know how the code is generated (refcomp/bytecode_gen.py) or run
(refcomp/resume.py).  Spec: spec/runtime.md.

Note [Stop before the break]: a handler may pop operands or mutate symbolic values
before it raises, and a break inside an inlined callee leaves the callee half traced.
So the state at a break is never taken from the failed trace: the frame is traced
again from its start and stopped *before* the breaking instruction (its index and how
many times it had been reached, for unrolled loops), as Dynamo restarts its analysis
with a speculation log.  Tracing is deterministic, so the second trace is the first
one's prefix.  A CALL stops before its KW_NAMES/PRECALL, which the generated code
re-runs natively with the call.
"""

from __future__ import annotations

import collections.abc
import dis
import types
from dataclasses import dataclass, field
from typing import Optional

import torch

from ir.facts import has_effects
from refcomp.guards import TYPE_MATCH
from refcomp.reasons import (
    CHANGING_NUMBER,
    INTERNAL_ERROR,
    LOOP_ACROSS_BREAK,
    NON_TENSOR_RESULT,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.recipes import (
    GRAD_CONTEXTS,
    GradExit,
    OpaqueVar,
    Recipes,
    Refused,
    effect_recipes,
)
from refcomp.runtime import Entry, build_entry, make_guard_set
from refcomp.side_effects import mutated_containers, stored_names
from refcomp.sources import AttrSource, ClosureCellSource, ClosureSource, LocalSource
from refcomp.tracer import attributes
from refcomp.tracer.context import TraceContext
from refcomp.tracer.effects import DICT_MUTATORS, LIST_MUTATORS, unsnap
from refcomp.tracer.frame import InstructionTranslator, _Return
from refcomp.tracer.values import (
    ConstVar,
    DictVar,
    ExitVar,
    GeneratorVar,
    IteratorVar,
    ListVar,
    MethodVar,
    ObjectVar,
    TensorVar,
    TupleVar,
)


class _Stop(Exception):
    """The trace reached its stop instruction (Note [Stop before the break])."""


class FrameTranslator(InstructionTranslator):
    """The tracer of a compiled frame whose locals are real values, wrapped on first read."""

    def __init__(self, ctx, code, f_globals, f_builtins, cells, *, pending, stop=None,
                 opaque=frozenset()):
        super().__init__(ctx, code, f_globals, f_builtins, {}, cells)
        self.pending = dict(pending)  # real locals not read yet (wrapped on first read)
        self.opaque = opaque  # names in L whose numbers are not specialized
        self.mutated_containers = mutated_containers(code)
        self.any_opaque = False
        self.stop = stop
        self.visits: dict = {}
        self.break_at = None  # (index, visit) of the first failing instruction
        self.break_in_callee = False
        self.stored_globals, self.stored_attrs = stored_names(code)

    def wrap_real(self, value, source):
        local = getattr(source, "local", None)
        if local in self.opaque and type(value) in (int, float) or \
                type(value) in (list, dict) and self._mutated(local, value) or \
                isinstance(value, types.BuiltinMethodType) and \
                not isinstance(value.__self__, (types.ModuleType, type, type(None))) or \
                isinstance(value, collections.abc.Iterator) and \
                not isinstance(value, torch.Tensor):
            # A changing number, a container the frame mutates, a builtin bound to an
            # object (`lst.append`, made anew each time), or a loop's real iterator
            # (looking into it would consume it): only their type is guarded.
            if type(value) in (list, dict):
                self.ctx.claim_container(value, "mutated", source)
            self.ctx.add_guard(TYPE_MATCH, source, type(value))
            self.any_opaque = True
            return OpaqueVar(value, source)
        if isinstance(value, types.MethodType) and value.__name__ == "__exit__" and \
                type(value.__self__) in GRAD_CONTEXTS:
            # The `__exit__` of a `with torch.no_grad():` entered natively restores `prev`.
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
        return self.ctx.wrap(value, source)

    def _mutated(self, name, value) -> bool:
        """Is this list/dict one the frame mutates (Note [Mutated containers])?"""
        if name in self.mutated_containers:
            return True
        return name.startswith("___stack") and any(
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
                self.break_in_callee = err.filename is not None or err.in_callee
            raise
        except (_Return, _Stop):
            raise
        except Exception as err:  # Note [Opaque numbers]: run it concretely instead
            self.break_at = self.break_at or (index, visit)
            rid = CHANGING_NUMBER if self.any_opaque else INTERNAL_ERROR
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

    # See Note [Reading what the frame writes] in spec/runtime.md.
    def LOAD_GLOBAL(self, inst):
        if inst.argval in self.stored_globals and \
                (id(self.f_globals), inst.argval) not in self.ctx.global_writes:
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"global {inst.argval!r} is assigned in this frame;"
                                       " it is read and updated outside the graph")
        super().LOAD_GLOBAL(inst)

    def LOAD_ATTR(self, inst):
        self._no_opaque(self.stack[-1], f"`.{inst.argval}` of")
        obj = self.stack[-1]
        if inst.argval in self.stored_attrs and not isinstance(obj, TensorVar) and not (
                isinstance(obj, ConstVar) and
                (id(obj.value), inst.argval) in self.ctx.attr_writes) and not (
                isinstance(obj, ConstVar) and obj.source is not None and
                attributes.is_flag(attributes.static_attr(obj.value, inst.argval, 0))):
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"attribute {inst.argval!r} is assigned in this"
                                       " frame; it is read and updated outside the graph")
        super().LOAD_ATTR(inst)

    def _no_opaque(self, vt, what):
        if isinstance(vt, OpaqueVar):
            if vt.kind in (list, dict):
                raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                                  f"{what} {vt.source.name()}, a {vt.kind.__name__}"
                                           " the frame mutates")
            if vt.kind in (int, float):
                raise Unsupported(CHANGING_NUMBER, f"{what} {vt.source.name()}")
            raise Unsupported(UNSUPPORTED_CALL, f"{what} {vt.source.name()}, a builtin method bound"
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
            elif isinstance(vt, MethodVar) and not _replayed_mutator(vt):
                todo.append(vt.self_vt)

    # An opaque value never enters an inlined callee, whose handlers would not expect it.
    def CALL(self, inst):
        self._no_opaque_deep(self.stack[len(self.stack) - inst.arg - 2:], "a call with")
        super().CALL(inst)

    def CALL_FUNCTION_EX(self, inst):
        self._no_opaque_deep(self.stack[-4:], "a call with")
        super().CALL_FUNCTION_EX(inst)

    def RETURN_VALUE(self, inst):
        # An opaque value has no place in a graph's outputs: the return runs natively.
        self._no_opaque_deep(self.stack[-1:], "returning")
        super().RETURN_VALUE(inst)

    def LOAD_METHOD(self, inst):
        vt = self.stack[-1]
        if not (isinstance(vt, OpaqueVar) and vt.kind in (list, dict) and
                inst.argval in LIST_MUTATORS | DICT_MUTATORS):  # replayed
            self._no_opaque(vt, f"`.{inst.argval}` of")
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
        if not isinstance(self.stack[-1], (IteratorVar, GeneratorVar)):
            raise Unsupported(LOOP_ACROSS_BREAK, "the loop's iterator is a real object")
        super().FOR_ITER(inst)


def _replayed_mutator(m: MethodVar) -> bool:
    """`lst.append` of a list the frame mutates: a replayed effect, not a read."""
    vt = m.self_vt
    return isinstance(vt, OpaqueVar) and vt.kind in (list, dict) and \
        m.name in LIST_MUTATORS | DICT_MUTATORS


def _cells(ctx, code, closure) -> dict:
    cells = {}
    for i, (name, cell) in enumerate(zip(code.co_freevars, closure or ())):
        # empty: contents None, a read is RB017 (eager raises NameError there too)
        cells[name] = ctx.real_cell(cell, ClosureSource(i, name), ClosureCellSource(i, name))
    return cells


@dataclass
class Break:
    """The state at a break: recipes of what the generated code receives after the graph."""

    index: int  # the breaking instruction (tracer index)
    stop: int  # where the trace stopped: the same, or the CALL's KW_NAMES/PRECALL
    stack: list = field(default_factory=list)  # recipes, bottom first (("null",) for NULL)
    locals: dict = field(default_factory=dict)  # name -> recipe (every bound local)
    cells: dict = field(default_factory=dict)  # cell variable -> recipe of its contents
    callee: bool = False  # the break is inside the function this CALL inlined
    rid: str = ""  # the reason's id
    grad_mode: Optional[bool] = None  # the grad mode after the graph, where it changed
    run_with_grad: bool = False  # see Note [Leaving no_grad inside a segment]
    # Recipes of the side effects replayed after the graph, in program order (Note
    # [Replayed side effects], refcomp/tracer/effects.py); `picked`: the graph's result is
    # (return value, values the effects need), their recipes ("pick", k).
    effects: list = field(default_factory=list)
    picked: bool = False
    # A frame traced to its return whose result holds objects the trace only read (a
    # DynamicCache passed in and handed back): the recipe of that result, rebuilt from the
    # frame's L/G/C/B and the graph's tensors (Note [Returned objects]).
    result: object = None
    # Filled by refcomp/resume.py: the generated code and the recipes of its arguments.
    code: object = None
    args: list = field(default_factory=list)
    callee_slot: Optional[int] = None  # index in args of the callable to compile
    last: tuple = (None, None)  # (closure, function) of the last call


def new_translator(cf, fn, L, *, stop=None, opaque=frozenset(), auto_dims=None,
                   pinned=None):
    """A FrameTranslator for a call of `fn` with locals `L` (a fresh trace context);
    `auto_dims`: the dims automatic dynamic made symbolic in this frame's cache (Note
    [Automatic dynamic] in refcomp/api.py), for frames that break and resume functions;
    `pinned`: the sizes a failed symbolic trace of the frame made static."""
    code = fn.__code__
    # `dynamic` only where set (a symbolic size crossing a break: see Recipes._size).
    ctx = TraceContext(code.co_name, **({"dynamic": True} if getattr(cf, "dynamic", False)
                                        else {}), auto_dims=auto_dims, pinned=pinned)
    builtins = fn.__globals__.get("__builtins__", __builtins__)
    if not isinstance(builtins, dict):
        builtins = builtins.__dict__
    tx = FrameTranslator(ctx, code, fn.__globals__, builtins,
                         _cells(ctx, code, fn.__closure__), pending=L, stop=stop,
                         opaque=opaque)
    if not _generated(code):
        # A user's frame: its arguments are read up front, as the whole-frame trace
        # (tracer/frame.py `trace`) reads them, so both see the same aliasing.
        for name in list(tx.pending):
            tx.locals[name] = tx.wrap_real(tx.pending.pop(name), LocalSource(name))
    return ctx, tx


def _generated(code) -> bool:
    from refcomp.bytecode_gen import GENERATED

    return code in GENERATED


def _call_start(tx, index) -> int:
    """A CALL's KW_NAMES/PRECALL prefix: the stack is the same there, and kw_names unset."""
    start = index
    if tx.instructions[index].opname == "CALL":
        while start > 0 and tx.instructions[start - 1].opname in ("PRECALL", "KW_NAMES",
                                                                   "EXTENDED_ARG"):
            start -= 1
    return start


def trace_to_break(cf, fn, L, *, opaque=frozenset(), first=None, auto_dims=None,
                   pinned=None):
    """Trace a call of `fn` up to its first break: (ctx, tx, Break, reason).

    `first`: a finished (ctx, tx) of the frame's whole trace, if one failed already.
    Returns (ctx, tx, None, None) when the frame traces to its return.  Raises
    Unsupported when the frame fails before any instruction of its own (not splittable).
    """
    if first is None:
        ctx, tx = new_translator(cf, fn, L, opaque=opaque, auto_dims=auto_dims,
                                 pinned=pinned)
        try:
            output = tx.run()
            if not _generated(fn.__code__):
                raise Refused("the frame traces whole here but not in the first trace")
            return ctx, tx, None, output
        except Unsupported as err:
            if tx.break_at is None:
                raise
            reason = err
    else:
        ctx, tx, reason = first
    index, visit = tx.break_at
    callee = tx.break_in_callee
    stop = _call_start(tx, index)
    ctx, tx = new_translator(cf, fn, L, stop=(stop, visit), opaque=opaque,
                             auto_dims=auto_dims, pinned=pinned)
    try:
        tx.run()
        raise Refused("the second trace did not reach the break")
    except _Stop:
        pass
    except Unsupported as err:
        raise Refused(f"the second trace failed earlier: {err}") from None
    brk = Break(index, stop, callee=callee and tx.instructions[index].opname in (
        "CALL", "CALL_FUNCTION_EX"),
                rid=reason.rid)
    return ctx, tx, brk, reason


def rebound_cells(code) -> set:
    """Cell names that `code` or a function nested in it stores into or deletes (an
    argument closed over is stored by none: its cell is filled on entry)."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("STORE_DEREF", "DELETE_DEREF")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= rebound_cells(const)
    return names


def build_break(cf, ctx, tx, brk: Break, reason) -> Entry:
    """The entry of a frame that breaks: its graph computes every live tensor."""
    if ctx.used_grad_toggle:
        brk.grad_mode = ctx.grad_enabled  # e.g. the break is inside a no_grad block
    recipes = Recipes(ctx)
    rebound = rebound_cells(tx.code)
    recipes.fixed_cells = {id(cell) for name, cell in tx.cells.items()
                           if name not in rebound and cell.contents is not None}
    brk.locals = {name: recipes.of(vt) for name, vt in tx.locals.items()}
    for name in tx.pending:
        brk.locals[name] = ("source", LocalSource(name))
    brk.stack = [recipes.of(vt) for vt in tx.stack]
    brk.cells = {name: recipes.of(cell.contents) for name, cell in tx.cells.items()
                 if not getattr(cell, "real", False) and cell.contents is not None}
    brk.effects = effect_recipes(ctx.effects, recipes.of, lambda vt: recipes.of(unsnap(vt)))
    recipes.check_aliasing()
    # Note [Leaving no_grad inside a segment]: the runtime runs a graph in the grad mode
    # of the call and detaches the outputs eager would not attach.  A segment that starts
    # inside `no_grad` and leaves it has outputs that need autograd, so its graph runs
    # with grad enabled (values from inside the block cannot feed them: RB011).
    entry_mode = ctx.guards[("GRAD_MODE", None)].expected
    brk.run_with_grad = not entry_mode and any(t.requires_grad for t in recipes.tensors)
    guards = cf._filter(ctx.finish_guards())
    # A segment with nothing to hand on still runs its graph when a node must run unused
    # (an opaque call that may raise or write, a random draw: ir/facts.py has_effects).
    if recipes.tensors or ctx.mutated or any(has_effects(n) for n in ctx.builder.nodes):
        entry = build_entry(ctx, TupleVar(recipes.tensors), cf.backend, cf.options, guards)
    else:
        entry = Entry(make_guard_set(ctx, guards, []), backend=cf.backend)
    entry.resume = brk
    entry.reason = reason
    entry.refs_to_hold = tuple(ctx.id_objects)
    _note_effects(entry, ctx)
    return entry


def build_whole(cf, ctx, output, guards) -> Entry:
    """The entry of a frame traced to its return; its side effects, if any, are replayed
    after the graph (Note [Replayed side effects]): the graph also returns the values
    they need, and the entry goes through refcomp/resume.py `run_break`, which has the
    frame's L/G/C/B to find their targets."""
    if _holds_read_objects(output) or any(
            _holds_made_objects(v) for e in ctx.effects for v in list(e[3]) +
            list(e[4].values())):
        # (an object made in the frame handed to an effect: rebuilt by recipes too)
        return _build_object_return(cf, ctx, output, guards)
    if not ctx.effects:
        return build_entry(ctx, output, cf.backend, cf.options, guards)
    values: list = []
    targets = Recipes(ctx)

    def value_of(vt):
        if isinstance(vt, ConstVar) and isinstance(vt.source, LocalSource):
            # An argument object (a ContextVar token handed to `reset`): the caller's own,
            # read from the frame's locals, which the graph does not change.
            return ("source", vt.source)
        values.append(unsnap(vt))
        return ("pick", len(values) - 1)

    def target_of(vt):
        recipe = targets.of(vt)
        if targets.tensors:
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"a side effect on {vt!r}, which is no object of"
                                       " the caller's")
        return recipe

    effects = effect_recipes(ctx.effects, target_of, value_of)
    entry = build_entry(ctx, TupleVar([output, TupleVar(values)]), cf.backend, cf.options,
                        guards)
    entry.resume = Break(-1, -1, effects=effects, picked=True)
    _note_effects(entry, ctx)
    return entry


def _note_effects(entry, ctx) -> None:
    if ctx.effects:
        entry.notes.append(f"side effects replayed after the graph ({len(ctx.effects)}):"
                           f" {'; '.join(e[-1] for e in ctx.effects)}")


# Note [Returned objects]: a frame may return an object it only read -- transformers
# models hand back the `past_key_values` cache they were given inside their ModelOutput.
# The graph's output plan holds tensors and constants, not objects (an object is guarded by
# type only, so a later call's differs): such a result is described by recipes instead,
# as live values at a break are ("source" re-reads the caller's object), the graph returns
# the tensors among them, and `resume.run_break` rebuilds the result after the graph (and
# after reading sources, before replaying the effects, as at a break).  This was a whole
# frame running eagerly ("the frame traces whole here but not in the first trace").
def _holds_read_objects(vt) -> bool:
    from refcomp.runtime import _pinned_object

    todo = [vt]
    while todo:
        v = todo.pop()
        if isinstance(v, ObjectVar):  # made in the frame: rebuilt by recipes
            return True
        if isinstance(v, (TupleVar, ListVar)):
            todo.extend(v.items)
        elif isinstance(v, DictVar):  # ModelOutputVar too: its fields are its attributes
            todo.extend(getattr(v, "fields", v.items).values())
            todo.extend(v.items.values())
        elif isinstance(v, ConstVar) and v.source is not None and \
                not isinstance(v.value, torch.Tensor) and not _pinned_object(v.value):
            return True
    return False


def _holds_made_objects(vt) -> bool:
    """Does `vt` hold an object made in the frame (Note [Objects made in the frame])?"""
    todo = [vt]
    while todo:
        v = todo.pop()
        if isinstance(v, ObjectVar):
            return True
        if isinstance(v, (TupleVar, ListVar)):
            todo.extend(v.items)
        elif isinstance(v, DictVar):
            todo.extend(v.items.values())
    return False


def _build_object_return(cf, ctx, output, guards) -> Entry:
    recipes = Recipes(ctx)
    try:
        result = recipes.of(output)
        effects = effect_recipes(ctx.effects, recipes.of, lambda vt: recipes.of(unsnap(vt)))
        recipes.check_aliasing()
    except Refused as refused:
        raise Unsupported(NON_TENSOR_RESULT, f"returning an object read by the frame: {refused}") \
            from None
    entry = build_entry(ctx, TupleVar(recipes.tensors), cf.backend, cf.options, guards)
    entry.resume = Break(-1, -1, effects=effects, result=result)
    _note_effects(entry, ctx)
    return entry


def build_return(cf, ctx, output) -> Entry:
    """The entry of a generated frame that traced to its return.

    A resume function that starts inside `with torch.no_grad():` leaves it: its entry
    restores the grad mode after the graph, as the block's `__exit__` would.
    """
    guards = cf._filter(ctx.finish_guards())
    entry = build_whole(cf, ctx, output, guards)
    if ctx.used_grad_toggle:
        if entry.resume is None:
            entry.resume = Break(-1, -1)
        entry.resume.grad_mode = ctx.grad_enabled
        entry.resume.run_with_grad = not ctx.guards[("GRAD_MODE", None)].expected and \
            ctx.grad_enabled
    return entry

