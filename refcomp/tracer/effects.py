"""Side effects on state that outlives the frame, recorded while tracing for replay.

Owns: `record` (a mutation of an outliving list/dict, an attribute or global write,
or a call of `print`/`warnings`/`logging`, appended to `TraceContext.effects` in
program order), the check that every value an effect needs can be handed to it
after the graph (`replayable`), and the bytecode patterns that make a list/dict an
`OpaqueVar` (`mutated_by_pattern`).  The replay itself (recipes of the values, then
the calls) is refcomp/recipes.py `replay`.  Spec: spec/runtime.md, "Side effects".

Note [Replayed side effects]: an effect is not run while tracing (it would run once,
at compile time) and not turned into a graph break (as Dynamo, refcomp keeps one
graph): the tracer records `(kind, target, name, args, kwargs)` of symbolic values
(`attr_writes`, `global_writes` read back what was written) and the entry replays them
after the graph; what is replayed, in which order, and what still breaks:
spec/runtime.md, "Side effects".
"""

from __future__ import annotations

import copy

import torch

from refcomp.reasons import UNREPLAYABLE_SIDE_EFFECT, Unsupported
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    ListVar,
    ObjectVar,
    OpaqueVar,
    TensorVar,
    TupleVar,
)

# Mutating methods replayed on an outliving list/dict.  The ones returning a value the
# trace needs (pop, setdefault) are replayed only where the tracer knows the contents.
LIST_MUTATORS = frozenset({"append", "extend", "insert", "clear", "reverse"})
DICT_MUTATORS = frozenset({"update", "clear"})
KNOWN_CONTENT_MUTATORS = frozenset({"pop", "remove", "setdefault", "popitem"})


def replayable(vt: VT, what: str, ctx) -> None:
    """Raise RB008 unless `vt` can be rebuilt after the graph for an effect."""
    todo, seen = [vt], set()
    while todo:
        v = todo.pop()
        if isinstance(v, ObjectVar):  # rebuilt with its attributes (recipes.py)
            if id(v) not in seen:
                seen.add(id(v))
                todo.extend(v.attrs.values())
            continue
        if isinstance(v, TensorVar):
            if v.alias in ctx.input_aliases and not (
                    v.source is not None and ctx.input_vars.get(v.source.name()) is v):
                raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                                  f"{what}: a view of an input tensor cannot be"
                                           " handed to a replayed side effect")
            continue
        if isinstance(v, (TupleVar, ListVar)) and v.source is None:
            todo.extend(v.items)
        elif isinstance(v, DictVar) and v.source is None:
            todo.extend(v.items.values())
        elif isinstance(v, (ConstVar, TupleVar, ListVar, DictVar, OpaqueVar)) and \
                v.source is not None:
            continue
        elif isinstance(v, ConstVar) and _immutable_const(v.value):
            continue
        else:
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"{what}: {v!r} cannot be handed to a replayed"
                                       " side effect")


def _immutable_const(value) -> bool:
    from refcomp.recipes import _immutable

    return _immutable(value)


def record(tx, kind: str, target, name, args=(), kwargs=None, *, what: str) -> None:
    """Append one effect (Note [Replayed side effects]).

    kind: "method" (target.name(*args, **kwargs)), "setattr" (setattr(target, name,
    args[0])), "object_setattr" (object.__setattr__(target, name, args[0])), "delitem"
    (del target[args[0]]), "setitem" (target[args[0]] = args[1]),
    "setglobal" (the globals dict `target` -- a Source, or None for the frame's own --
    gets name = args[0]), "call" (target(*args, **kwargs)).
    """
    ctx = tx.ctx
    kwargs = dict(kwargs or {})
    for v in list(args) + list(kwargs.values()):
        replayable(v, what, ctx)
    if kind not in ("setglobal",) and target is not None:
        replayable(target, what, ctx)
    ctx.effects.append((kind, target, name, list(args), kwargs, what))


def snapshot(vt: VT) -> VT:
    """A value as it is now: later in-place ops on its tensors do not show (for print).

    A tensor becomes a copy of its TensorVar holding today's IR value (no source: it is
    never the caller's object); `unsnap` returns the original where nothing changed.
    """
    if isinstance(vt, TensorVar):
        snap = copy.copy(vt)
        snap.source = None
        snap.snapshot_of = vt
        return snap
    if isinstance(vt, (TupleVar, ListVar)) and vt.source is None:
        return type(vt)([snapshot(i) for i in vt.items])
    return vt


def unsnap(vt: VT) -> VT:
    """The original of a snapshot whose tensor was not written since (the same object)."""
    if isinstance(vt, TensorVar):
        orig = getattr(vt, "snapshot_of", None)
        return orig if orig is not None and orig.value is vt.value else vt
    if isinstance(vt, (TupleVar, ListVar)) and vt.source is None and any(
            getattr(i, "snapshot_of", None) is not None for i in vt.items):
        return type(vt)([unsnap(i) for i in vt.items])
    return vt


def is_replayed_call(value) -> bool:
    """print and warnings.warn: calls that only emit (they return None)."""
    import warnings

    return any(value is f for f in (print, warnings.warn, warnings.warn_explicit))


def mutated_by_pattern(insts, index: int) -> bool:
    """Is the value loaded by insts[index] mutated right away (`x.append(...)`,
    `x[k] = v`, `del x[k]`)?  Then it is wrapped as an OpaqueVar."""
    if index + 1 >= len(insts):
        return False
    nxt = insts[index + 1]
    if nxt.opname == "LOAD_METHOD" and nxt.argval in LIST_MUTATORS | DICT_MUTATORS:
        return True
    return index + 2 < len(insts) and nxt.opname in ("LOAD_CONST", "LOAD_FAST") and \
        insts[index + 2].opname in ("STORE_SUBSCR", "DELETE_SUBSCR")


def opaque_container(ctx, value, source) -> OpaqueVar:
    """A list/dict the code mutates: its type is guarded, its contents are not."""
    from refcomp.guards import TYPE_MATCH

    key = source.name()
    if key in ctx.objects:
        return ctx.objects[key]
    ctx.claim_container(value, "mutated", source)
    ctx.add_guard(TYPE_MATCH, source, type(value))
    vt = ctx.objects[key] = OpaqueVar(value, source)
    return vt


def is_tensor_module_attr(value, name) -> bool:
    """Parameters, buffers and submodules are registered state: their writes still break."""
    return isinstance(value, torch.nn.Module) and any(
        name in value.__dict__.get(d, {}) for d in ("_parameters", "_buffers", "_modules"))


def stores_itself(obj, name, value) -> bool:
    """`module.buf = t` where t is the tensor `module.buf` holds (spectral_norm's power
    iteration: `self._u = F.normalize(..., out=self._u)`): Module.__setattr__ keeps the
    same object, so the store changes nothing."""
    if not (isinstance(obj, ConstVar) and obj.source is not None and
            isinstance(value, TensorVar) and value.source is not None and
            is_tensor_module_attr(obj.value, name)):
        return False
    from refcomp.tracer.context import module_attr_source

    return value.source.name() == module_attr_source(obj.value, obj.source, name).name()


def stored_names(code) -> tuple:
    """(globals, attribute names) the code assigns (refcomp/side_effects.py)."""
    from refcomp.side_effects import stored_names as names

    return names(code)


def counted_attrs(code) -> frozenset:
    """Attribute names the code assigns from their own value (refcomp/side_effects.py)."""
    from refcomp.side_effects import counted_attrs as names

    return names(code)


# Logger methods that only emit (return None): replayed.  `warning_once`/`info_once` are
# the methods transformers adds to logging.Logger.
LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception",
                            "critical", "log", "warning_once", "info_once"})


def is_logger_method(self_vt: VT, name: str) -> bool:
    import logging

    return isinstance(self_vt, ConstVar) and isinstance(
        self_vt.value, (logging.Logger, logging.LoggerAdapter)) and name in LOGGER_METHODS
