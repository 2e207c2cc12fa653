"""What calls, attribute reads, subscripts and operators mean on symbolic values.

Owns: the dispatch from a callable to its treatment — inline a user function,
apply a torch-table entry (refcomp/tracer/torch_table.py), call an nn.Module
(refcomp/tracer/modules.py), evaluate a pure builtin on constants — and the
Python-level semantics of operators on constants and containers.  Anything else
raises Unsupported with a reason id.  Spec: spec/tracer.md, "Inlining".
"""

from __future__ import annotations

import builtins
import collections.abc
import contextvars
import copy
import dataclasses
import functools
import inspect
import itertools
import math
import operator
import os
import types
import weakref

import sympy
import torch

from refcomp import guards as G
from refcomp.reasons import (
    DISABLED_FUNCTION,
    INEXPRESSIBLE_OP,
    TENSOR_CONTROL_FLOW,
    TENSOR_TO_PYTHON,
    TRACE_EXCEPTION,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    UNSUPPORTED_TENSOR_METHOD,
    Raised,
    Unsupported,
)
from refcomp.sources import (
    ATTR,
    MODULE,
    AttrSource,
    BuiltinSource,
    ConstSource,
    DerivedSource,
    GlobalSource,
    IdentitySource,
    ItemSource,
    ModuleSliceSource,
    Source,
)
from refcomp.tracer import (
    classes,
    copies,
    effects,
    objects,
    opaque,
    rng,
    tensor_layout,
    torch_table,
)
from refcomp.tracer.checkpoint import CHECKPOINT, call_checkpoint
from refcomp.tracer.context import CONSTANT_TYPES, constant_key, module_attr_source
from refcomp.tracer.values import (
    VT,
    CellVar,
    ConstVar,
    ContextTokenVar,
    DictVar,
    ExitVar,
    FunctionVar,
    GeneratorVar,
    GradModeVar,
    IteratorVar,
    ListVar,
    MadeObjectVar,
    MethodVar,
    ModelOutputVar,
    NullVar,
    ObjectVar,
    OpaqueVar,
    PartialVar,
    SuperVar,
    TensorVar,
    TupleVar,
    as_python,
    sequence_of,
)

# Modules whose attributes are trusted not to change: reading torch.relu installs no
# guard.  See spec/guards.md, "Deliberately not guarded".
TRUSTED_MODULES = (torch, torch.nn.functional, torch.nn, math, operator, builtins)

_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
           "@": operator.matmul, "&": operator.and_, "|": operator.or_, "^": operator.xor,
           "<<": operator.lshift, ">>": operator.rshift, "<": operator.lt,
           "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
           ">=": operator.ge}
_OPERATOR_SYMBOL = {fn: sym for sym, fn in _BINARY.items()}
_INPLACE_METHOD = {"+": "add_", "-": "sub_", "*": "mul_", "/": "div_", "//": "floor_divide_",
                   "%": "remainder_", "**": "pow_", "&": "bitwise_and_", "|": "bitwise_or_",
                   "^": "bitwise_xor_"}
_UNARY = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert}

# Builtins evaluated directly when every argument is a constant (pure, no side effects).
PURE_BUILTINS = {abs, all, any, bool, divmod, float, int, isinstance, issubclass, len, max,
                 min, pow, repr, round, sorted, str, sum, tuple, list, hash, chr, ord,
                 reversed, range, slice, type, callable, hasattr}
PURE_FUNCTIONS = {v for m in (math, operator) for v in vars(m).values() if callable(v)} | {
    torch.finfo, torch.iinfo}  # of a dtype: fixed facts (`torch.finfo(x.dtype).min`)

_DISABLED_ATTR = "_refcomp_disabled"


# --- reading names and attributes -----------------------------------------------------------
def load_global(tx, name: str) -> VT:
    written = tx.ctx.global_writes.get((id(tx.f_globals), name))
    if written is not None:  # Note [Replayed side effects]: the value this trace stored
        return written
    if name in tx.f_globals:
        value = tx.f_globals[name]
        source = GlobalSource(name) if tx.globals_source is None else ItemSource(
            tx.globals_source, name)
        if isinstance(value, CONSTANT_TYPES) and name in effects.stored_names(tx.code)[0]:
            # Note [Reading what the frame writes] (refcomp/side_effects.py).
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"global {name!r} is assigned in this frame;"
                                       " it is read and updated outside the graph")
        if type(value) in (list, dict) and effects.mutated_by_pattern(tx.instructions,
                                                                      tx.ip - 1):
            return effects.opaque_container(tx.ctx, value, source)
        return tx.ctx.wrap(value, source)
    if name in tx.f_builtins:
        return tx.ctx.wrap(tx.f_builtins[name], BuiltinSource(name))
    raise Unsupported(TRACE_EXCEPTION, f"name {name!r} is not defined")


def load_attr(tx, obj: VT, name: str) -> VT:
    if isinstance(obj, SuperVar):
        return _super_attr(tx, obj, name)
    if isinstance(obj, TensorVar):
        return tensor_layout.tensor_attr(tx.ctx, obj, name)
    if isinstance(obj, OpaqueVar):
        if obj.kind in (list, dict) and name in effects.LIST_MUTATORS | effects.DICT_MUTATORS:
            return MethodVar(name, obj, name)
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"`.{name}` of {obj.source.name()}, a"
                                   f" {obj.kind.__name__} the frame mutates")
    if isinstance(obj, ConstVar):
        written = tx.ctx.attr_writes.get((id(obj.value), name))
        if written is not None:  # Note [Replayed side effects]: the value this trace stored
            return written
        if obj.source is not None and name in effects.counted_attrs(tx.code) and \
                isinstance(getattr(obj.value, name, None), CONSTANT_TYPES) and \
                not is_flag(getattr(obj.value, name, None)):
            # Note [Reading what the frame writes] (refcomp/side_effects.py).
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"attribute {name!r} is assigned in this frame;"
                                       " it is read and updated outside the graph")
        if obj.source is not None and not effects.is_tensor_module_attr(obj.value, name) \
                and tx.current is not None and tx.current.opname == "LOAD_ATTR" and \
                type(getattr(obj.value, name, None)) in (list, dict) and \
                effects.mutated_by_pattern(tx.instructions, tx.ip - 1):
            src = module_attr_source(obj.value, obj.source, name) if isinstance(
                obj.value, torch.nn.Module) else AttrSource(obj.source, name, ATTR)
            return effects.opaque_container(tx.ctx, getattr(obj.value, name), src)
    if isinstance(obj, classes.ClassVar):
        return classes.class_attr(tx, obj, name)
    if isinstance(obj, classes.FunctionCtxVar):
        return classes.ctx_attr(obj, name)
    if isinstance(obj, ModelOutputVar):
        return _model_output_attr(tx, obj, name)
    if isinstance(obj, ObjectVar):  # Note [Objects made in the frame]
        return objects.load_attr(tx, obj, name)
    if isinstance(obj, TupleVar) and obj.field(name) is not None:
        return obj.field(name)  # r.values of torch.return_types.max
    if isinstance(obj, (TupleVar, ListVar, DictVar)):
        return MethodVar(name, obj, name)
    if not isinstance(obj, ConstVar):
        raise Unsupported(INEXPRESSIBLE_OP, f"attribute {name!r} of {obj!r}")
    value = obj.value
    if isinstance(value, types.ModuleType) and value in TRUSTED_MODULES:
        return tx.ctx.wrap(_getattr(value, name), None)
    if isinstance(value, torch.nn.Module):
        attr = _getattr(value, name)
        if isinstance(attr, types.MethodType) and attr.__self__ is value:
            tx.ctx.guard_not_overridden(obj.source, name)
            return MethodVar(attr.__func__, obj, name)
        if obj.source is None:
            return tx.ctx.wrap(attr, None)
        return tx.ctx.wrap(attr, module_attr_source(value, obj.source, name))
    if effects.is_logger_method(obj, name):  # replayed (Note [Replayed side effects])
        return MethodVar(name, obj, name)
    if isinstance(value, contextvars.ContextVar) and name in ("set", "reset", "get"):
        return MethodVar(name, obj, name)  # Note [Context variables]
    attr = _getattr(value, name)
    # A method bound at this access (`opt.zero_grad`: torch's own methods too) is a new
    # object every time: the function is what is guarded (an identity guard on the bound
    # method failed right after tracing, so a training step re-traced on every call).
    if isinstance(attr, types.MethodType) and isinstance(attr.__func__, types.FunctionType) \
            and (not _is_torch_function(attr.__func__) or attr.__self__ is value):
        if attr.__self__ is value and hasattr(value, "__dict__"):
            tx.ctx.guard_not_overridden(obj.source, name)
        return MethodVar(attr.__func__, obj, name)
    if isinstance(attr, types.BuiltinMethodType) and attr.__self__ is value:
        # `s.startswith`: a new bound object at every access (an identity guard on it
        # could never pass); what it does is fixed by `value`, guarded where it was read.
        return tx.ctx.wrap(attr, None)
    if type(obj) is MadeObjectVar and not isinstance(value, torch.nn.Module):
        return copies.made_attr(tx, obj, attr, name)  # Note [Deep copies]
    source = AttrSource(obj.source, name, ATTR) if obj.source is not None else None
    return tx.ctx.wrap(attr, source)


def is_flag(value) -> bool:
    """A bool, None or str attribute the frame also assigns (`self.compiling = False`,
    `config.problem_type = "regression"`) is read and guarded like any other: it takes few
    values, so it recompiles at most that often; counters and other numbers stay breaks
    (Note [Reading what the frame writes])."""
    return value is None or isinstance(value, bool) or type(value) is str


def _getattr(value, name):
    try:
        return getattr(value, name)
    except AttributeError as e:
        raise Unsupported(TRACE_EXCEPTION, str(e)) from None


# --- subscripts -----------------------------------------------------------------------------
def getitem(tx, obj: VT, index: VT) -> VT:
    if isinstance(obj, TensorVar):
        return tensor_layout.tensor_getitem(tx.ctx, obj, index)
    key = as_python(require_const(tx, index, "subscript"))
    if isinstance(obj, (TupleVar, ListVar)):
        if isinstance(key, slice):  # a slice of a torch.Size is a torch.Size
            return TupleVar(obj.items[key], cls=_size_or_tuple(obj)) \
                if isinstance(obj, TupleVar) else ListVar(obj.items[key])
        try:
            return obj.items[key]
        except (IndexError, TypeError) as e:
            raise Unsupported(TRACE_EXCEPTION, f"index {key!r}: {e}") from None
    if isinstance(obj, ModelOutputVar) and not isinstance(key, str):
        return getitem(tx, TupleVar(list(obj.items.values())), index)  # to_tuple()[key]
    if isinstance(obj, ModelOutputVar):
        key = model_output_key(obj.cls, key)
    if isinstance(obj, DictVar):  # its keys are exact (made here, or guarded)
        if key not in obj.items:
            raise Raised(KeyError(key), f"KeyError {key!r}")
        return obj.items[key]
    if isinstance(obj, ConstVar):
        value = obj.value
        if isinstance(value, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)):
            tx.ctx.guard_module_keys(obj)
            names = list(value._modules)
            if isinstance(key, slice) and not isinstance(value, torch.nn.ModuleDict):
                # Note [Sliced module containers]: `self.layers[:n]` is a new container of
                # the same submodules, made now as eager makes it (ModuleList renumbers
                # them, Sequential keeps their names).  The guard above pins which ones it
                # holds; each item is read from the container that was sliced
                # (ModuleSliceSource.item_source), so a submodule has one source however
                # it is reached and no guard re-makes the slice.
                base = obj.source
                if isinstance(base, ModuleSliceSource):
                    names, base = [base.names[int(n)] if isinstance(value, torch.nn.ModuleList)
                                   else n for n in names], base.base_source
                source = ModuleSliceSource(base, key, names[key]) if base is not None else None
                return ConstVar(value[key], source)
            name = key if isinstance(value, torch.nn.ModuleDict) else names[key]
            if isinstance(obj.source, ModuleSliceSource):
                source = obj.source.item_source(names.index(name))
            else:
                source = AttrSource(obj.source, name, MODULE) if obj.source is not None else None
            return tx.ctx.wrap(value._modules[name], source)
        if type(obj) is MadeObjectVar and not isinstance(value, torch.nn.Module):
            try:  # Note [Deep copies]: a mutable item stays the copy's own object
                return copies.made_attr(tx, obj, value[key])
            except Exception as e:
                raise Unsupported(TRACE_EXCEPTION,
                                  f"{type(value).__name__}[{key!r}]: {e}") from None
        try:
            return tx.ctx.wrap(value[key], ItemSource(obj.source, key) if obj.source else None)
        except KeyError as e:
            if obj.source is not None and isinstance(value, collections.abc.Mapping) and \
                    constant_key(key):  # `os.environ[k]`: the key's absence is guarded
                tx.ctx.guard_fact(obj.source, lambda m, k=key: k in m, f"{key!r} in {{}}",
                                  False)
                raise Raised(KeyError(*e.args), f"{type(value).__name__}[{key!r}]: {e}") \
                    from None
            raise Unsupported(TRACE_EXCEPTION, f"{type(value).__name__}[{key!r}]: {e}") from None
        except Exception as e:
            raise Unsupported(TRACE_EXCEPTION, f"{type(value).__name__}[{key!r}]: {e}") from None
    raise Unsupported(INEXPRESSIBLE_OP, f"subscript of {obj!r}")


def setitem(tx, obj: VT, index: VT, value: VT) -> None:
    if isinstance(obj, TensorVar):
        tensor_layout.tensor_setitem(tx.ctx, obj, index, value)
        return
    if isinstance(obj, ModelOutputVar):
        key = model_output_key(obj.cls, as_python(require_const(tx, index, "subscript")))
        if key not in obj.fields:  # ModelOutput.__setitem__ also sets the attribute
            raise Unsupported(UNSUPPORTED_CALL, f"{obj.cls.__name__}[{key!r}] = ..., not a field")
        obj.items[key] = obj.fields[key] = value
        return
    if isinstance(obj, (ListVar, DictVar)):
        key = as_python(require_const(tx, index, "subscript"))
        if obj.source is not None:  # Note [Replayed side effects]
            if isinstance(obj, DictVar) and not isinstance(key, CONSTANT_TYPES):
                raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                                  f"item assignment into {obj.source.name()}")
            effects.record(tx, "setitem", obj, None, [index, value],
                           what=f"{obj.source.name()}[{key!r}] = ...")
        try:
            obj.items[key] = value
        except (IndexError, TypeError) as e:
            raise Unsupported(TRACE_EXCEPTION, f"item assignment: {e}") from None
        return
    if isinstance(obj, OpaqueVar) and obj.kind is dict:
        effects.record(tx, "setitem", obj, None, [index, value],
                       what=f"{obj.source.name()}[...] = ...")
        return
    raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                      f"item assignment into {obj!r}, which outlives the frame")


def delitem(tx, obj: VT, index: VT) -> None:
    """`del obj[key]`: on a frame-local list/dict symbolically; on an outliving one also
    replayed (Note [Replayed side effects])."""
    if isinstance(obj, (ListVar, DictVar)):
        key = as_python(require_const(tx, index, "subscript"))
        try:
            del obj.items[key]
        except (IndexError, KeyError, TypeError) as e:
            raise Unsupported(TRACE_EXCEPTION, f"del: {type(e).__name__} {e}") from None
        if obj.source is not None:
            effects.record(tx, "delitem", obj, None, [index],
                           what=f"del {obj.source.name()}[{key!r}]")
        return
    if isinstance(obj, OpaqueVar) and obj.kind is dict and _is_constant(index) and \
            not any(e[1] is obj and (e[0] != "setitem" or _is_constant(e[3][0]) and
                                     as_python(e[3][0]) == as_python(index))
                    for e in tx.ctx.effects):  # nothing earlier touched this key
        # The key must be there when the frame starts (a guard), or eager's KeyError
        # would come from the replay, after the graph: then CPython runs the `del`.
        key = as_python(index)
        if isinstance(key, CONSTANT_TYPES) and key in obj.real:
            tx.ctx.guard_fact(obj.source, lambda d, k=key: k in d, f"{key!r} in {{}}", True)
            effects.record(tx, "delitem", obj, None, [index],
                           what=f"del {obj.source.name()}[{key!r}]")
            return
    raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"del of an item of {obj!r}")


# --- operators ------------------------------------------------------------------------------
# Operators on complex tensors, which only opaque nodes take: the torch function to call
# (tensor first; a reflected form swaps where the operator commutes).
_COMPLEX_BINARY = {"+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div,
                   "**": torch.pow, "@": torch.matmul, "==": torch.eq, "!=": torch.ne}
_COMMUTES = frozenset("+ * == !=".split())


def _complex_operand(*vts) -> bool:
    return any(isinstance(v, TensorVar) and v.meta.is_complex() for v in vts)


def binary(tx, sym: str, a: VT, b: VT) -> VT:
    if _complex_operand(a, b) and sym in _COMPLEX_BINARY:
        if not isinstance(a, TensorVar) and sym in _COMMUTES:
            a, b = b, a
        if isinstance(a, TensorVar):
            return opaque.call_opaque(tx.ctx, _COMPLEX_BINARY[sym], [a, b], {})
    if isinstance(a, TensorVar) or isinstance(b, TensorVar):
        return torch_table.call_torch(tx.ctx, _BINARY[sym], [a, b], {})
    if _symbolic(a) or _symbolic(b):
        return _symbolic_binary(tx, sym, a.value, b.value)
    if isinstance(a, (TupleVar, ListVar)) or isinstance(b, (TupleVar, ListVar)):
        return _sequence_op(sym, sequence_of(a) or a, sequence_of(b) or b)
    if isinstance(a, ConstVar) and isinstance(b, ConstVar):
        if sym in ("==", "!="):
            guard_compared(tx.ctx, a, b, equality=True)
        return _fold(_BINARY[sym], a.value, b.value)
    if sym in ("==", "!=") and all(isinstance(v, (TupleVar, ListVar, ConstVar)) for v in (a, b)):
        return _fold(_BINARY[sym], as_python(a), as_python(b))
    raise Unsupported(INEXPRESSIBLE_OP, f"operator {sym} on {a!r}, {b!r}")


def _symbolic(v: VT) -> bool:
    return isinstance(v, ConstVar) and isinstance(v.value, sympy.Basic) and bool(
        v.value.free_symbols)


def _symbolic_binary(tx, sym, a, b) -> ConstVar:
    """Arithmetic on dynamic sizes stays symbolic; `==`/`!=` become sympy relations (Python
    `==` on sympy is structural); `/` and the rest specialize to the traced sizes."""
    if sym in ("+", "-", "*", "//", "%") and all(isinstance(v, (int, sympy.Basic))
                                                 and not isinstance(v, bool) for v in (a, b)):
        return _fold(_BINARY[sym], a, b)
    if sym in ("==", "!=", "<", "<=", ">", ">=") and all(
            isinstance(v, (int, float, sympy.Basic)) for v in (a, b)):
        rel = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt,
               ">=": sympy.Ge}[sym](a, b)
        return ConstVar(tx.ctx.decide(rel) if isinstance(rel, sympy.Basic) and
                        rel.free_symbols else bool(rel))
    ctx = tx.ctx
    a = ctx.specialize(a) if isinstance(a, sympy.Basic) else a
    b = ctx.specialize(b) if isinstance(b, sympy.Basic) else b
    return _fold(_BINARY[sym], a, b)


def _size_or_tuple(*vts) -> type:
    """What tuple arithmetic gives: torch.Size if an operand is one (torch.Size's `+`
    and `*` return a torch.Size, `(1,) + size` too), else tuple (a structseq's slice)."""
    return torch.Size if any(getattr(v, "cls", None) is torch.Size for v in vts) else tuple


def _sequence_op(sym, a, b):
    if sym == "+" and type(a) is type(b):
        if isinstance(a, TupleVar):
            return TupleVar(a.items + b.items, cls=_size_or_tuple(a, b))
        return ListVar(a.items + b.items)
    if sym == "*":
        seq, n = (a, b) if isinstance(a, (TupleVar, ListVar)) else (b, a)
        if isinstance(n, ConstVar) and isinstance(n.value, int):
            if isinstance(seq, TupleVar):
                return TupleVar(seq.items * n.value, cls=_size_or_tuple(seq))
            return ListVar(seq.items * n.value)
    if sym in ("==", "!="):
        return _fold(_BINARY[sym], as_python(a), as_python(b))
    raise Unsupported(INEXPRESSIBLE_OP, f"operator {sym} on {a!r}, {b!r}")


def inplace_binary(tx, sym: str, a: VT, b: VT) -> VT:
    if isinstance(a, TensorVar):
        # `x += y` on a tensor is the in-place method: the caller's tensor changes.
        return torch_table.call_torch(tx.ctx, getattr(torch.Tensor, _INPLACE_METHOD[sym]),
                                      [a, b], {})
    if isinstance(a, ListVar) and sym == "+":
        items = iterate(tx, b)
        if a.source is not None:  # Note [Replayed side effects]
            effects.record(tx, "method", a, "extend", [ListVar(items)],
                           what=f"{a.source.name()} += ...")
        a.items.extend(items)
        return a
    return binary(tx, sym, a, b)


def unary(tx, name: str, a: VT) -> VT:
    if _complex_operand(a) and _UNARY[name] is operator.neg:
        return opaque.call_opaque(tx.ctx, torch.neg, [a], {})
    if isinstance(a, TensorVar):
        return torch_table.call_torch(tx.ctx, _UNARY[name], [a], {})
    return _fold(_UNARY[name], as_python(require_const(tx, a, "operand")))


def _fold(fn, *args, **kwargs) -> ConstVar:
    if any(isinstance(a, sympy.Basic) and a.free_symbols for a in args) and fn not in (
            operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
            operator.neg, operator.pos):
        raise Unsupported(INEXPRESSIBLE_OP, f"{getattr(fn, '__name__', fn)} of a dynamic size")
    try:
        return ConstVar(fn(*args, **kwargs))
    except Exception as e:
        raise Unsupported(TRACE_EXCEPTION, f"{getattr(fn, '__name__', fn)}: {e}") from None


def is_same(a: VT, b: VT, ctx=None) -> bool:
    if isinstance(a, ConstVar) and isinstance(b, ConstVar):
        if ctx is not None:
            guard_compared(ctx, a, b, equality=False)
        return a.value is b.value
    if isinstance(a, ConstVar) or isinstance(b, ConstVar):
        return False  # a symbolic value is never a given real object (None, a module...)
    if a is not b and isinstance(a, TensorVar) and isinstance(b, TensorVar) and \
            ctx is not None and a.source is not None and b.source is not None and \
            a.source.name() in ctx.examples and b.source.name() in ctx.examples and \
            ctx.input_vars.get(a.source.name()) is a and ctx.input_vars.get(b.source.name()) is b:
        # Two graph inputs still holding what was read: one real object under two names
        # or two objects (regression: `x is y` was False for f(t, t)).  Guarded.
        same = ctx.examples[a.source.name()] is ctx.examples[b.source.name()]
        ctx.add_guard(G.EQUALS_MATCH, IdentitySource(a.source, b.source), same)
        return same
    return a is b


def guard_compared(ctx, a: ConstVar, b: ConstVar, equality: bool) -> None:
    """Two objects compared by `is` (or `==`): the result depends on which objects they
    are, unless one is a constant (None, a number...), whose comparison with an object
    of a guarded type is decided by the type — except through a user `__eq__`."""
    objects = [v for v in (a, b) if not isinstance(v.value, CONSTANT_TYPES)]
    if len(objects) == 2:
        ctx.guard_identity(a)
        ctx.guard_identity(b)
    elif equality:
        for v in objects:
            if type(v.value).__eq__ is not object.__eq__:
                ctx.guard_identity(v)


def contains(tx, container: VT, item: VT) -> bool:
    if isinstance(container, ModelOutputVar):
        key = as_python(require_const(tx, item, "key"))
        return model_output_key(container.cls, key) in container.items
    if isinstance(container, DictVar):
        return as_python(require_const(tx, item, "key")) in container.items
    if isinstance(container, (TupleVar, ListVar)):
        if isinstance(item, TensorVar):
            raise Unsupported(TENSOR_CONTROL_FLOW, "`tensor in sequence` compares tensor values")
        return as_python(item) in [as_python(i) for i in container.items
                                   if not isinstance(i, TensorVar)]
    if isinstance(container, ConstVar) and isinstance(item, ConstVar):
        value = container.value
        if isinstance(value, (torch.nn.ModuleDict, torch.nn.ModuleList, torch.nn.Sequential)):
            tx.ctx.guard_module_keys(container)
        elif container.source is not None and not isinstance(value, CONSTANT_TYPES) and \
                type(value) not in (set, frozenset):  # (sets of constants: value-guarded)
            tx.ctx.guard_identity(item)
            key = item.value
            result = key in value
            tx.ctx.guard_fact(container.source, lambda c, k=key: k in c,
                              f"{key!r} in {{}}", result)
            return result
        tx.ctx.guard_identity(item)
        return item.value in container.value
    raise Unsupported(INEXPRESSIBLE_OP, f"`in` on {container!r}")


def truth(tx, v: VT) -> bool:
    if isinstance(v, TensorVar):
        raise Unsupported(TENSOR_CONTROL_FLOW, "the truth value of a tensor")
    if isinstance(v, (TupleVar, ListVar, DictVar)):
        return bool(v.items)
    if _symbolic(v):
        return tx.ctx.decide(sympy.Ne(v.value, 0))
    if isinstance(v, ObjectVar):  # __bool__, else __len__, else true
        answer = objects.truth(tx, v)
        return True if answer is None else truth(tx, answer)
    if isinstance(v, ConstVar):
        value = v.value
        if v.source is not None and not isinstance(value, CONSTANT_TYPES) and (
                hasattr(type(value), "__bool__") or hasattr(type(value), "__len__")):
            if isinstance(value, (torch.nn.ModuleList, torch.nn.Sequential,
                                  torch.nn.ModuleDict)):
                tx.ctx.guard_module_keys(v)
            else:
                tx.ctx.guard_fact(v.source, bool, "bool({})", bool(value))
        return bool(value)
    return True


def key_of(v: VT):
    return as_python(v)


def require_const(tx, v: VT, what: str) -> VT:
    if isinstance(v, TensorVar):
        raise Unsupported(TENSOR_TO_PYTHON, f"{what} needs a tensor's value")
    return v


def iterate(tx, obj: VT) -> list:
    """The items a `for` loop over `obj` visits (loops are unrolled)."""
    if isinstance(obj, (TupleVar, ListVar)):
        return list(obj.items)
    if isinstance(obj, DictVar):
        return [ConstVar(k) for k in obj.items]
    if isinstance(obj, IteratorVar):
        return obj.items[obj.pos:]
    if isinstance(obj, GeneratorVar):
        return obj.rest()
    if isinstance(obj, TensorVar):
        return tensor_layout.unbind(tx.ctx, obj)
    if isinstance(obj, ConstVar):
        value = obj.value
        if isinstance(value, (torch.nn.ModuleList, torch.nn.Sequential)):
            tx.ctx.guard_module_keys(obj)
            return [getitem(tx, obj, ConstVar(i)) for i in range(len(value))]
        if isinstance(value, torch.nn.ModuleDict):
            tx.ctx.guard_module_keys(obj)
            return [ConstVar(k) for k in value._modules]
        if isinstance(value, (range, str, bytes, tuple, frozenset)) or type(value) in (
                list, dict, set):
            if obj.source is not None and not isinstance(value, (range, str, bytes)):
                wrapped = tx.ctx.wrap(value, obj.source)
                if not isinstance(wrapped, ConstVar):
                    return iterate(tx, wrapped)
                if type(value) not in (set, frozenset) or not all(
                        constant_key(v) for v in wrapped.value):
                    # Regression: this recursed forever (RB018) on a sourced set whose
                    # items the guards cannot hold.
                    raise Unsupported(INEXPRESSIBLE_OP, f"iteration over {obj.source.name()}, a"
                                               f" {type(value).__name__} of objects")
                value = wrapped.value  # a set of constants: wrap guarded its contents
            return [ConstVar(v) for v in value]
    if isinstance(obj, (ConstVar, ObjectVar)) and objects.is_python_sequence(obj.python_type()):
        return objects.iterate_sequence(tx, obj)
    raise Unsupported(INEXPRESSIBLE_OP, f"iteration over {obj!r}")


# --- calls ----------------------------------------------------------------------------------
def call_function(tx, fn: VT, args: list, kwargs: dict) -> VT:
    if isinstance(fn, FunctionVar) and fn.code.co_name == "<genexpr>":
        return _generator_expression(tx, fn, args)
    if isinstance(fn, FunctionVar):
        return inline(tx, fn.code, fn.f_globals, args, kwargs, fn.defaults, fn.kwdefaults,
                      fn.closure, fn.globals_source)
    if isinstance(fn, MethodVar):
        return _call_method(tx, fn, args, kwargs)
    if isinstance(fn, ExitVar):
        tx.ctx.set_grad_enabled(fn.previous)
        return ConstVar(None)
    if isinstance(fn, rng.RngRestoreVar):  # leaving `with freeze_rng_state():`
        return fn.exit(tx.ctx)
    if isinstance(fn, classes.ApplyVar):  # Fn.apply of a class made in the frame
        return classes.apply(tx, fn, args, kwargs)
    if isinstance(fn, classes.ClassVar):
        raise Unsupported(UNSUPPORTED_CALL, f"an instance of {fn.name}, a class made in the frame")
    if isinstance(fn, PartialVar):  # partial(f, *a, **k)(*b, **l) is f(*a, *b, **k, **l)
        return call_function(tx, fn.fn, fn.args + list(args), {**fn.kwargs, **kwargs})
    if isinstance(fn, NullVar) or not isinstance(fn, ConstVar):
        raise Unsupported(UNSUPPORTED_CALL, f"call of {fn!r}")
    value = fn.value
    if getattr(value, _DISABLED_ATTR, False):
        raise Unsupported(DISABLED_FUNCTION, f"{getattr(value, '__qualname__', value)}")
    if isinstance(value, torch.nn.Module):
        from refcomp.tracer import modules

        return modules.call_module(tx, fn, args, kwargs)
    if value is super:
        return _super(tx, args, kwargs)
    grad = _grad_mode_call(tx, value, args, kwargs)
    if grad is not None:
        return grad
    if _hashable(value) and value in _OPERATOR_SYMBOL and len(args) == 2 and not kwargs:
        return binary(tx, _OPERATOR_SYMBOL[value], *args)  # operator.mul(a, b) is a * b
    if torch_table.has_entry(value):
        return _call_torch_or_opaque(tx, value, args, kwargs)
    if value is CHECKPOINT:  # Note [Checkpoint traced inline]
        return call_checkpoint(tx, args, kwargs, call_function)
    special = _BUILTIN_HANDLERS.get(value) if _hashable(value) else None
    if special is None and isinstance(value, types.FunctionType):
        special = _NAMED_HANDLERS.get((value.__module__, value.__qualname__))
    if special is not None:
        return special(tx, args, kwargs)
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        return call_function(tx, MethodVar(value.__func__, tx.ctx.wrap(value.__self__, None),
                                           value.__name__), args, kwargs)
    if isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields") \
            and hasattr(value, "_make") and \
            (getattr(value.__new__, "__module__", None) or "").startswith("namedtuple_"):
        return _namedtuple(value, args, kwargs)
    if isinstance(value, weakref.ReferenceType) and not args and not kwargs:
        # ref(): the referent, read through the ref (guarded like any other read: the
        # ref dying or pointing elsewhere fails the guard on what the trace saw).
        target = value()
        if fn.source is None:
            return ConstVar(target)
        return tx.ctx.wrap(target, DerivedSource(fn.source, _deref, "{}()"))
    if _hashable(value) and value in _NO_OP_CALLS:
        return ConstVar(_NO_OP_CALLS[value](args))
    if isinstance(value, types.BuiltinMethodType) and \
            (type(value.__self__) in (str, bytes, int, float, bool, tuple, frozenset) or
             type(value.__self__) is set and value.__name__ in _SET_QUERIES) and \
            all(_is_constant(v) for v in list(args) + list(kwargs.values())):
        # `attn_implementation.startswith("paged|")`: a method of an immutable constant
        # (guarded by value where it was read) answers the same every time: folded.
        return _fold(value, *[as_python(a) for a in args],
                     **{k: as_python(v) for k, v in kwargs.items()})
    if _is_status_query(value) and not args and not kwargs:
        if (value.__module__, value.__qualname__) in COMPILING_QUERIES:
            return ConstVar(True)  # as under Dynamo: Note [Status queries]
        try:
            return ConstVar(value())
        except Exception as e:  # (torch.cuda's query on a CPU build raises): eager raises it
            raise Raised(e, f"{_public_name(value)} raises here", UNSUPPORTED_CALL) from None
    if isinstance(value, type) and is_model_output_class(value):
        return _new_model_output(tx, value, args, kwargs)
    if isinstance(value, type) and issubclass(value, BaseException) and \
            value.__module__ == "builtins":
        return new_exception(tx, fn, args, kwargs)
    if type(value) is functools._lru_cache_wrapper and \
            isinstance(getattr(value, "__wrapped__", None), types.FunctionType):
        # Note [lru_cache wrappers]
        if getattr(value.__wrapped__, "_dynamo_marked_constant", False):
            return _assumed_constant(value, args, kwargs)
        src = None if fn.source is None else AttrSource(fn.source, "__wrapped__")
        return call_function(tx, ConstVar(value.__wrapped__, src), args, kwargs)
    if isinstance(value, types.FunctionType) and \
            getattr(value, "_dynamo_marked_constant", False):
        return _assumed_constant(value, args, kwargs)
    if isinstance(value, types.FunctionType):
        _check_inlinable(value)
        # A function without a source (a method reached through its class) is held by
        # the guards, so its __code__, __defaults__ and closure are guarded all the same.
        src = fn.source or ConstSource(value, value.__qualname__)
        inner = _unwrapped(value)
        if inner is not value:
            value, src = inner, AttrSource(src, "__wrapped__")
        tx.ctx.wrap(value.__code__, AttrSource(src, "__code__"))  # ID_MATCH: fn.__code__ = ...
        closure = _real_closure(tx, value, src)
        globals_source = None if value.__globals__ is tx_root(tx).f_globals else \
            _GlobalsDict(value)
        return inline(tx, value.__code__, value.__globals__, args, kwargs,
                      _wrap_defaults(tx, value, src), _wrap_kwdefaults(tx, value, src),
                      closure, globals_source)
    pure_method = isinstance(value, types.BuiltinMethodType) and type(
        getattr(value, "__self__", None)) in (str, bytes) or value in (dict, set, frozenset)
    if pure_method or _hashable(value) and (value in PURE_BUILTINS or value in PURE_FUNCTIONS):
        # An iterator the trace made (a generator expression) is drained first, in order.
        args = [ListVar(iterate(tx, a)) if isinstance(a, (GeneratorVar, IteratorVar)) else a
                for a in args]
        if all(_is_constant(v) for v in list(args) + list(kwargs.values())):
            if value in (set, frozenset, dict, sorted) and _has_symbols(
                    [as_python(a) for a in args]):
                # {s0, 3}, sorted([s0, 3]): the answer depends on the size's value
                raise Unsupported(INEXPRESSIBLE_OP, f"{value.__name__}() of dynamic sizes")
            return _fold(value, *[as_python(a) for a in args],
                         **{k: as_python(v) for k, v in kwargs.items()})
    if effects.is_replayed_call(value):  # print, warnings.warn: after the graph
        effects.record(tx, "call", fn, None, [effects.snapshot(a) for a in args],
                       {k: effects.snapshot(v) for k, v in kwargs.items()},
                       what=f"{getattr(value, '__qualname__', value)}(...)")
        return ConstVar(None)
    if value is functools.partial and args:  # made here: its parts stay symbolic
        return PartialVar(args[0], args[1:], kwargs)
    if type(value) is functools.partial:
        return call_function(tx, _unpack_partial(tx, fn), args, kwargs)
    if _is_frozen_dataclass(value) and all(
            _is_constant(v) for v in list(args) + list(kwargs.values())):
        return _frozen_dataclass(tx, value, args, kwargs)
    if opaque.opaque_name(value) is not None:
        return opaque.call_opaque(tx.ctx, value, args, kwargs)
    if isinstance(value, torch._library.custom_ops.CustomOpDef):
        # torch.library.custom_op: calling it calls its operator (torch.ops.ns.name),
        # typed by its registered fake kernel on meta tensors like any opaque call.
        return opaque.call_opaque(tx.ctx, value._opoverload, args, kwargs)
    if isinstance(value, type) and issubclass(value, torch.nn.Module) and \
            _is_torch_function(value):
        return _new_torch_module(value, args, kwargs)
    if _is_torch_function(value) or isinstance(value, types.BuiltinFunctionType):
        raise Unsupported(UNSUPPORTED_CALL, f"{_public_name(value)} is not in the torch table")
    if not isinstance(value, type) and \
            isinstance(getattr(type(value), "__call__", None), types.FunctionType):
        # A callable object: `obj(x)` is `type(obj).__call__(obj, x)`, traced like any
        # method (an instance attribute named __call__ is not what CPython calls).
        return call_function(tx, MethodVar(type(value).__call__, fn, "__call__"), args,
                             kwargs)
    if isinstance(value, type) and objects.plain_class(value):
        return objects.new_object(tx, fn, args, kwargs)  # Note [Objects made in the frame]
    if objects.is_object_init(value, args, kwargs):  # super().__init__() reaching object
        return ConstVar(None)
    if isinstance(value, type):
        raise Unsupported(UNSUPPORTED_CALL,
                          f"constructing a {value.__qualname__} ({value.__module__}):"
                                   " its class is not a plain Python class (a metaclass"
                                   " __call__, __new__, __slots__, a builtin base, its own"
                                   " __setattr__...), so its objects are not traced")
    raise Unsupported(UNSUPPORTED_CALL, f"call of {type(value).__name__} {value!r}")


# Methods of a set that read it and return a new value (a set the trace holds is a
# constant: made by the trace, or guarded by value where it was read).
_SET_QUERIES = frozenset({"issubset", "issuperset", "isdisjoint", "union", "intersection",
                          "difference", "symmetric_difference", "copy", "__contains__"})


def _is_frozen_dataclass(value) -> bool:
    """A frozen dataclass whose __init__ the decorator generated (exec'd from a string),
    made by type.__call__, with plain fields (no InitVar, no default_factory)."""
    params = getattr(value, "__dataclass_params__", None)
    if not isinstance(value, type) or params is None or not params.frozen:
        return False
    init = vars(value).get("__init__")
    fields = getattr(value, "__dataclass_fields__", {}).values()
    return isinstance(init, types.FunctionType) and init.__code__.co_filename == "<string>" \
        and type(value).__call__ is type.__call__ and value.__new__ is object.__new__ \
        and all(f.default_factory is dataclasses.MISSING and
                f._field_type is not dataclasses._FIELD_INITVAR for f in fields)


def _frozen_dataclass(tx, cls, args, kwargs) -> ConstVar:
    """cls(*args, **kwargs) of a frozen dataclass of constants (F.linear_cross_entropy's
    options, remade by dataclasses.replace).  Its generated __init__ only stores the
    fields: they are stored now, on a new object, and its __post_init__ (a validator) is
    traced like any method, so a check that fails is a break and eager raises.  The object
    is immutable: nothing can tell it from the one eager makes."""
    try:
        bound = inspect.signature(cls).bind(*[as_python(a) for a in args],
                                            **{k: as_python(v) for k, v in kwargs.items()})
    except TypeError as e:
        raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}(): {e}") from None
    bound.apply_defaults()
    obj = object.__new__(cls)
    for f in cls.__dataclass_fields__.values():
        if f._field_type is not dataclasses._FIELD:
            continue  # a ClassVar pseudo-field
        if f.init:
            object.__setattr__(obj, f.name, bound.arguments[f.name])
        elif f.default is not dataclasses.MISSING:
            object.__setattr__(obj, f.name, f.default)
    post_init = getattr(cls, "__post_init__", None)
    if post_init is not None:
        call_function(tx, ConstVar(post_init), [ConstVar(obj)], {})
    return ConstVar(obj)


def _new_torch_module(cls, args, kwargs) -> MadeObjectVar:
    """`torch.nn.CrossEntropyLoss()` inside forward (transformers' heads make their loss
    module at every call): a torch.nn module made from constants, with no parameters or
    buffers and no draw from the RNG, is made now, at trace time, and its call traced.
    Eager makes a new one per call, so the trace's object (a MadeObjectVar) cannot leave
    the frame: returning it is RB012, handing it to a replayed effect RB008, and a break
    while it is live refused (refcomp/recipes.py); each of those runs as eager does.  Its
    calls and attribute reads cannot tell it from eager's."""
    what = f"constructing a {cls.__qualname__}"
    if not all(_is_constant(v) for v in list(args) + list(kwargs.values())):
        raise Unsupported(UNSUPPORTED_CALL, f"{what} from traced values")
    rng = torch.random.get_rng_state()
    try:
        m = cls(*[as_python(a) for a in args], **{k: as_python(v) for k, v in kwargs.items()})
    except Exception as e:
        raise Unsupported(UNSUPPORTED_CALL, f"{what}: {type(e).__name__}: {e}") from None
    if any(True for _ in m.parameters()) or any(True for _ in m.buffers()) or \
            not torch.equal(rng, torch.random.get_rng_state()):
        torch.random.set_rng_state(rng)  # the draws eager makes happen at the break
        raise Unsupported(UNSUPPORTED_CALL, f"{what}: its parameters are initialized at every call")
    return MadeObjectVar(m)

# Note [Model outputs]: every transformers model returns a `ModelOutput`, a dataclass
# that is also an OrderedDict of its non-None fields (`out.logits`, `out["logits"]`,
# `out[0]`, `out.to_tuple()`).  Its construction was a graph break and so was its return
# (an object the trace did not make).  A class whose ModelOutput behaviour is its own
# (dataclass-generated __init__, ModelOutput's __post_init__/__setattr__/__setitem__/
# __getitem__, no default factories; its own to_tuple, only ever called by name, is
# inlined there: CLIPOutput's) is made symbolically as ModelOutputVar, as
# Dynamo does: the fields as given (positional in field order, then keywords, defaults
# None), the dict part the non-None ones in field order -- what __init__ and __post_init__
# leave when the first field is a tensor or another field is set.  The other case (a
# lone non-tensor first field, which __post_init__ iterates as key/value pairs) is RB004.
# Results and values live at a break are rebuilt with exactly these fields and items
# (values.make_model_output).  transformers 5.24 renamed the cache field to `cache`: its
# metaclass wraps each dataclass __init__ to rename `past_key_values=`/`cache_params=`
# (`_bc_init`), and ModelOutput maps those old names to `cache` as keys and attributes
# (`model_output_key`); both are followed symbolically, warnings skipped as under a
# compiler (transformers' is_tracing() is True while refcomp traces).
_MODEL_OUTPUT_METHODS = ("__init__", "__post_init__", "__setattr__", "__setitem__",
                         "__getitem__", "to_tuple", "__getattr__", "__getattribute__")


def _bc_init(init):
    """The dataclass __init__ inside transformers 5.24's renaming wrapper
    (`_BCCacheNameMeta.__setattr__`: `past_key_values=`/`cache_params=` become `cache=`),
    or None when `init` is not that wrapper."""
    code = getattr(init, "__code__", None)  # (functools.wraps copied the names)
    if code is None or code.co_qualname != "_BCCacheNameMeta.__setattr__.<locals>.__init__" \
            or not code.co_filename.endswith(os.path.join("transformers", "utils",
                                                          "generic.py")):
        return None
    return getattr(init, "__wrapped__", None)


def model_output_key(cls, key):
    """transformers >= 5.24 names the cache field `cache`; `past_key_values` and
    `cache_params` still name it as keys and attributes (ModelOutput's
    `_replace_old_cache_name`, whose deprecation warning is skipped while compiling)."""
    if key in ("past_key_values", "cache_params"):
        rename = getattr(cls, "_replace_old_cache_name", None)
        if getattr(rename, "__qualname__", "") == "ModelOutput._replace_old_cache_name":
            return "cache"
    return key


def is_model_output_class(cls) -> bool:
    base = next((k for k in cls.__mro__ if k.__name__ == "ModelOutput" and
                 k.__module__ == "transformers.utils.generic"), None)
    if base is None or cls is base or not dataclasses.is_dataclass(cls):
        return False
    for klass in cls.__mro__[:cls.__mro__.index(base)]:
        for name in _MODEL_OUTPUT_METHODS:
            fn = vars(klass).get(name)
            if name == "to_tuple" and isinstance(fn, types.FunctionType):
                continue  # only called by name: inlined (own_to_tuple)
            if name == "__init__" and _bc_init(fn) is not None:
                fn = _bc_init(fn)
            if fn is not None and not (name == "__init__" and getattr(
                    getattr(fn, "__code__", None), "co_filename", None) == "<string>"):
                return False  # a method of its own (dataclasses' __init__ is exec'd)
    return all(f.init and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(cls))


def own_to_tuple(cls):
    """The class's own `to_tuple` (CLIPOutput's turns its nested outputs into tuples):
    inlined when called; None when it is ModelOutput's."""
    fn = getattr(cls, "to_tuple", None)
    if getattr(fn, "__qualname__", "") == "ModelOutput.to_tuple":
        return None
    return fn


def _new_model_output(tx, cls, args, kwargs) -> ModelOutputVar:
    names = [f.name for f in dataclasses.fields(cls)]
    if _bc_init(vars(cls).get("__init__")) is not None:  # transformers >= 5.24
        kwargs = dict(kwargs)
        for old in ("past_key_values", "cache_params"):  # _rename_kwargs_for_bc
            if old in kwargs:
                if "cache" in kwargs:
                    raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}() got both `cache` and"
                                               f" `{old}`")
                kwargs["cache"] = kwargs.pop(old)
                break
    if len(args) > len(names):
        raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}() takes {len(names)} arguments")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in given:
            raise Unsupported(TRACE_EXCEPTION,
                              f"{cls.__name__}() got an unexpected or repeated {k!r}")
        given[k] = v
    fields = {}
    for f in dataclasses.fields(cls):
        if f.name not in given and f.default is dataclasses.MISSING:
            raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}() missing argument {f.name!r}")
        fields[f.name] = given.get(f.name, ConstVar(f.default))
    first = fields[names[0]]
    is_none = [isinstance(v, ConstVar) and v.value is None for v in fields.values()]
    if all(is_none[1:]) and not isinstance(first, TensorVar) and not is_none[0]:
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.__name__}({names[0]}=...) of a non-tensor alone:"
                                   " __post_init__ reads it as key/value pairs")
    items = {k: v for k, v, none in zip(fields, fields.values(), is_none) if not none}
    return ModelOutputVar(cls, fields, items)


def _model_output_attr(tx, obj: ModelOutputVar, name: str) -> VT:
    name = model_output_key(obj.cls, name)  # the `past_key_values` property reads `cache`
    if name in obj.fields:
        return obj.fields[name]
    if name in ("to_tuple", "keys", "values", "items", "get"):
        return MethodVar(name, obj, name)
    attr = getattr(obj.cls, name, None)
    if attr is not None and isinstance(attr, CONSTANT_TYPES):
        return ConstVar(attr)  # a class-level constant (the class is fixed by the trace)
    raise Unsupported(UNSUPPORTED_CALL, f"attribute {name!r} of a {obj.cls.__name__}")


def set_model_output_attr(obj: ModelOutputVar, name: str, value: VT) -> None:
    """`out.name = value`: ModelOutput.__setattr__ sets the item too unless value is None
    (then the item, if any, keeps its old value)."""
    name = model_output_key(obj.cls, name)
    if name not in obj.fields:
        raise Unsupported(UNSUPPORTED_CALL,
                          f"setting {name!r} of a {obj.cls.__name__}, not a field")
    obj.fields[name] = value
    if not (isinstance(value, ConstVar) and value.value is None):
        obj.items[name] = value


def new_exception(tx, cls: ConstVar, args, kwargs) -> ConstVar:
    """`KeyError(key)`: a builtin exception made from constants, for a traced `raise`
    (Note [Exceptions inside inlined frames], refcomp/tracer/frame.py)."""
    if kwargs or not all(_is_constant(a) for a in args):
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.value.__name__}() of traced values")
    return ConstVar(cls.value(*[as_python(a) for a in args]))


# --- super() -------------------------------------------------------------------------------
def _super(tx, args, kwargs) -> SuperVar:
    """`super()` in the traced function `tx` (its `__class__` cell and first argument, as
    CPython reads them) or `super(cls, obj)`.  Spec: spec/tracer.md, "Python features"."""
    if kwargs or len(args) not in (0, 2):
        raise Unsupported(UNSUPPORTED_CALL, "super() with other than zero or two arguments")
    if args:
        cls, obj = args
    else:
        cell = tx.cells.get("__class__")
        first = tx.code.co_varnames[0] if tx.code.co_argcount else None
        obj = tx.locals.get(first) if first is not None else None
        if obj is None and first in tx.cells:  # the first argument lives in a cell
            obj = tx.cells[first].contents
        if cell is None or cell.contents is None or obj is None:
            raise Unsupported(TRACE_EXCEPTION, "super(): no __class__ cell or first argument")
        cls = cell.contents
    if not (isinstance(cls, ConstVar) and isinstance(cls.value, type)):
        raise Unsupported(UNSUPPORTED_CALL, f"super() of {cls!r}")
    if isinstance(obj, ObjectVar) and issubclass(obj.cls, cls.value):
        return SuperVar(cls.value, obj)  # self of an __init__ or method being inlined
    if not isinstance(obj, ConstVar) or isinstance(obj.value, type) or \
            not isinstance(obj.value, cls.value):
        raise Unsupported(UNSUPPORTED_CALL, f"super() bound to {_describe_vt(obj)}")
    return SuperVar(cls.value, obj)


def _describe_vt(vt: VT) -> str:
    """A value as a user knows it: its source's name or its type, never a VT repr."""
    if vt.source is not None:
        return vt.source.name()
    return f"a {vt.python_type().__name__}"


def _super_attr(tx, sup: SuperVar, name: str) -> VT:
    """`super().name`: the first class after `sup.cls` in the object's MRO that defines
    `name`, bound as CPython binds it.  The object's type is guarded where it was read
    and the attribute found is guarded by identity on its class."""
    obj = sup.obj
    mro = obj.python_type().__mro__
    for klass in mro[mro.index(sup.cls) + 1:]:
        if name in vars(klass):
            attr = vars(klass)[name]
            break
    else:
        raise Unsupported(TRACE_EXCEPTION, f"'super' object has no attribute {name!r}")
    holder = ConstSource(klass, klass.__qualname__)
    found = tx.ctx.wrap(attr, DerivedSource(holder, lambda k, n=name: vars(k).get(n),
                                            f"{klass.__qualname__}.{name}"))
    if isinstance(attr, staticmethod):
        return ConstVar(attr.__func__)
    if isinstance(attr, classmethod):
        return PartialVar(ConstVar(attr.__func__), [ConstVar(obj.python_type())], {})
    if isinstance(attr, (types.FunctionType, types.MethodDescriptorType,
                         types.WrapperDescriptorType)):
        return PartialVar(found, [obj], {})
    if hasattr(type(attr), "__get__"):  # a property or another descriptor
        raise Unsupported(UNSUPPORTED_CALL, f"super().{name}, a {type(attr).__name__}")
    return found


def _dict_get(tx, args, kwargs):
    """`dict.get(d, key[, default])`, reached through `super().get` of a dict subclass
    (transformers' `_CanRecordRegistry`): the item read is guarded like any other."""
    if kwargs or len(args) not in (2, 3):
        raise Unsupported(TRACE_EXCEPTION, "dict.get() takes a dict, a key and a default")
    d, key, default = args[0], args[1], args[2] if len(args) == 3 else ConstVar(None)
    key = as_python(require_const(tx, key, "key"))
    if isinstance(d, DictVar):
        return d.items.get(key, default)
    if not (isinstance(d, ConstVar) and isinstance(d.value, dict) and constant_key(key)):
        raise Unsupported(UNSUPPORTED_CALL, f"dict.get of {_describe_vt(d)}")
    present = key in d.value
    if d.source is None:
        return ConstVar(d.value[key]) if present else default
    tx.ctx.guard_fact(d.source, lambda m, k=key: dict.__contains__(m, k), f"{key!r} in {{}}",
                      present)
    if not present:
        return default
    return tx.ctx.wrap(dict.__getitem__(d.value, key),
                       DerivedSource(d.source, lambda m, k=key: dict.__getitem__(m, k),
                                     f"{{}}[{key!r}]"))


def _unpack_partial(tx, fn: ConstVar) -> PartialVar:
    """A real functools.partial as a PartialVar: its func, args and keywords are read
    from their sources (guarded like any argument), so another partial recompiles."""
    value, src = fn.value, fn.source
    if src is None:
        return PartialVar(tx.ctx.wrap(value.func, None),
                          [tx.ctx.wrap(a, None) for a in value.args],
                          {k: tx.ctx.wrap(v, None) for k, v in value.keywords.items()})
    func = tx.ctx.wrap(value.func, AttrSource(src, "func"))
    args = tx.ctx.wrap(value.args, AttrSource(src, "args"))
    keywords = tx.ctx.wrap(value.keywords, AttrSource(src, "keywords"))
    if not isinstance(args, TupleVar) or not isinstance(keywords, DictVar):
        raise Unsupported(UNSUPPORTED_CALL, f"call of {value!r}")
    return PartialVar(func, args.items, keywords.items)


# --- inlining library Python (spec/tracer.md, "Inlining") -----------------------------------
# Python functions of these modules are not traced through: they change dispatch or
# global state, or exist to observe the program.  A call to one is a graph break.
INLINE_SKIP = ("torch._dynamo", "torch.compiler", "torch.fx", "torch.jit._script",
               "torch.jit._trace", "torch.autograd", "torch.utils.checkpoint",
               "torch.utils.hooks", "torch.utils._python_dispatch", "torch.overrides",
               "torch.distributed", "torch.cuda", "torch.random", "torch.serialization",
               "torch._ops", "torch._C", "logging", "warnings")


def _namedtuple(cls, args, kwargs) -> TupleVar:
    """cls(*args, **kwargs) of a collections.namedtuple / typing.NamedTuple class (its
    generated __new__, not a user override: checked by the caller)."""
    fields, defaults = cls._fields, getattr(cls, "_field_defaults", {})
    if len(args) > len(fields):
        raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}() takes {len(fields)} arguments")
    items = dict(zip(fields, args))
    for k, v in kwargs.items():
        if k not in fields or k in items:
            raise Unsupported(TRACE_EXCEPTION,
                              f"{cls.__name__}() got an unexpected or repeated {k!r}")
        items[k] = v
    for k in fields:
        if k not in items:
            if k not in defaults:
                raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}() missing argument {k!r}")
            items[k] = ConstVar(defaults[k])
    return TupleVar([items[k] for k in fields], cls=cls)


def _has_symbols(x) -> bool:
    if isinstance(x, sympy.Basic):
        return bool(x.free_symbols)
    if isinstance(x, (list, tuple, set, frozenset)):
        return any(_has_symbols(i) for i in x)
    if isinstance(x, dict):
        return any(_has_symbols(k) or _has_symbols(v) for k, v in x.items())
    return False


def _deref(ref):
    return ref()


# Note [Status queries]: "is torch.compile/jit/export/stream capture running?".  Models
# ask them to pick a code path (transformers' `is_torchdynamo_compiling`).  "Is
# torch.compile tracing?" (COMPILING_QUERIES) answers True while refcomp traces, as it does
# under Dynamo: libraries use it to take a path written for compilers that computes the
# same values without reading tensor data in Python (transformers then always applies the
# padding mask instead of checking `padding_mask.all()` to drop it, and keeps its output
# collector in an attribute instead of a ContextVar).  Code that CPython runs -- a break's
# instruction, a disabled function, an eager fallback -- asks the real function and gets
# False, exactly as between Dynamo's graphs, so a library meant for torch.compile sees the
# mix it was written for.  The other queries (export, TorchScript, stream capture) answer
# what the call answers now: refcomp is none of those.  None is guarded (none changes
# inside a refcomp-compiled call on CPU).  Matched by (defining module, name), so no
# module is imported to find them.
COMPILING_QUERIES = frozenset({
    ("torch.compiler", "is_compiling"), ("torch.compiler", "is_dynamo_compiling"),
    ("torch._dynamo.external_utils", "is_compiling")})
STATUS_QUERIES = COMPILING_QUERIES | frozenset({
    ("torch.compiler", "is_exporting"),
    ("torch.jit._trace", "is_tracing"), ("torch._jit_internal", "is_scripting"),
    ("torch.cuda.graphs", "is_current_stream_capturing"),
    ("torch.xpu.graphs", "is_current_stream_capturing")})


def _is_status_query(value) -> bool:
    return isinstance(value, types.FunctionType) and \
        (value.__module__, value.__qualname__) in STATUS_QUERIES


def _check_inlinable(fn) -> None:
    module = getattr(fn, "__module__", None) or ""
    for prefix in INLINE_SKIP:
        if module == prefix or module.startswith(prefix + "."):
            raise Unsupported(UNSUPPORTED_CALL, f"{_public_name(fn)} is on the inline skip list"
                                       f" ({prefix})")


def _unwrapped(fn):
    """torch's own wrappers that only convert exceptions (a try block the tracer does not
    enter) are traced as the function they wrap: while tracing nothing raises."""
    inner = getattr(fn, "__wrapped__", None)
    if isinstance(inner, types.FunctionType) and _is_torch_function(fn) and \
            fn.__code__.co_name in ("wrapped", "wrapper", "_fn"):
        return inner
    return fn


def _no_torch_function(args) -> bool:
    """has_torch_function(...) on traced values: plain tensors and constants have no
    __torch_function__ override (tensor subclasses are refused when read)."""
    def plain(v):
        if isinstance(v, (TensorVar, ConstVar)) and not (
                isinstance(v, ConstVar) and hasattr(type(v.value), "__torch_function__")
                and not isinstance(v.value, type)):
            return True
        if isinstance(v, (TupleVar, ListVar)):
            return all(plain(i) for i in v.items)
        return isinstance(v, (DictVar, FunctionVar, MethodVar))
    return not all(plain(a) for a in args)


# Builtins that only observe dispatch state refcomp keeps fixed (no tensor subclasses,
# no tracing, no logging): call -> the value eager would get.
_NO_OP_CALLS = {
    torch._C._has_torch_function: _no_torch_function,
    torch._C._has_torch_function_unary: _no_torch_function,
    torch._C._has_torch_function_variadic: _no_torch_function,
    torch._C._get_tracing_state: lambda args: None,
    torch._C._log_api_usage_once: lambda args: None,
    # Tracing here is refcomp's, not torch.jit's: eager answers False outside jit.trace.
    torch.jit._trace.is_tracing: lambda args: False,
    torch._C._is_tracing: lambda args: False,
    # The deterministic-algorithms flags are part of the guarded global state (Note
    # [Global state], refcomp/global_state.py): the trace may read them.
    torch._C._get_deterministic_algorithms: lambda args: torch._C._get_deterministic_algorithms(),
    torch._C._get_deterministic_algorithms_warn_only:
        lambda args: torch._C._get_deterministic_algorithms_warn_only(),
}


def tx_root(tx):
    while tx.parent is not None:
        tx = tx.parent
    return tx


class _GlobalsDict(Source):
    """The globals dict of an inlined function from another module (held as a constant)."""

    def __init__(self, fn):
        # Named by the module whose dict it is, not fn.__module__: functools.wraps copies
        # the wrapped function's __module__ onto a wrapper whose globals are another
        # module's (transformers' capture_outputs), and guards load sources by name, so
        # two dicts under one name read the wrong one (every guard failed right after
        # tracing).  A dict that is no module's own is told apart by its id.
        import sys

        self.globals = fn.__globals__
        name = self.globals.get("__name__", fn.__module__)
        module = sys.modules.get(name) if isinstance(name, str) else None
        self.module = name if module is not None and vars(module) is self.globals else \
            f"{name}@{id(self.globals):#x}"

    def name(self):
        # `M[...]`, not `G[...]`: `G['torch']` is the compiled frame's global `torch` (the
        # module object), and a check that loaded torch's globals dict under that name
        # subscripted the module and raised: every frame that read `torch` and inlined a
        # function of torch/__init__.py (F.pad's non-constant modes call
        # torch.are_deterministic_algorithms_enabled) failed its guards right after
        # tracing and ran eagerly (tests/frontend/test_globals_sources.py).
        return f"M[{self.module!r}]"

    def expr(self, cg):
        return cg.const(self.globals)


# Note [lru_cache wrappers]: a call of a `functools.lru_cache` wrapper of a Python
# function traces the function it wraps, the cache skipped, as Dynamo does
# (transformers' `is_torch_distributed_available()` inside Wav2Vec2's forward broke the
# graph).  A function marked `_dynamo_marked_constant` (torch._dynamo.
# assume_constant_result; transformers' `_make_compile_constant` marks its install probes
# under their lru_cache) is called while tracing, through its cache when it has one, and
# its result is a constant, unguarded, as under Dynamo: the marker promises the answer
# never changes.  Its arguments must be constants and its result a constant (else RB004).
def _assumed_constant(value, args, kwargs) -> VT:
    name = getattr(value, "__qualname__", repr(value))
    values = list(args) + list(kwargs.values())
    if not all(_is_constant(v) for v in values) or _has_symbols([as_python(v) for v in values]):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} (assume_constant_result) of a non-constant"
                                   " argument")
    result = value(*[as_python(a) for a in args],
                   **{k: as_python(v) for k, v in kwargs.items()})
    if not isinstance(result, CONSTANT_TYPES):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} (assume_constant_result) returned a"
                                   f" {type(result).__name__}, not a constant")
    return ConstVar(result)


def _is_constant(v: VT) -> bool:
    try:
        as_python(v)
        return True
    except TypeError:
        return False


def _hashable(value) -> bool:
    try:
        hash(value)
        return True
    except TypeError:
        return False


def _public_name(fn) -> str:
    """module.qualname; a wrapper made inside a function (F.max_pool1d is torch's
    `boolean_dispatch.<locals>.fn`) goes by the __name__ it is published under."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    if "<locals>" in qualname:
        qualname = getattr(fn, "__name__", qualname)
    # A method of a builtin type (`"sdpa".startswith`) has no module: "str.startswith".
    return f"{module}.{qualname}" if module else qualname


def _is_torch_function(fn) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def _wrap_defaults(tx, fn, src) -> tuple:
    """fn.__defaults__, read from `src` (guarded: mutating `fn.__defaults__` recompiles)."""
    vt = tx.ctx.wrap(fn.__defaults__, AttrSource(src, "__defaults__"))
    return tuple(vt.items) if isinstance(vt, TupleVar) else ()


def _wrap_kwdefaults(tx, fn, src) -> dict:
    if not fn.__code__.co_kwonlyargcount:
        return {}  # keyword-only defaults cannot matter to a function without them
    vt = tx.ctx.wrap(fn.__kwdefaults__, AttrSource(src, "__kwdefaults__"))
    return dict(vt.items) if isinstance(vt, DictVar) else {}


def _real_closure(tx, fn, fn_source) -> tuple:
    cells = []
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            contents = cell.cell_contents
        except ValueError:
            raise Unsupported(TRACE_EXCEPTION, "empty closure cell") from None
        source = None
        if fn_source is not None:
            source = AttrSource(ItemSource(AttrSource(fn_source, "__closure__"), i),
                                "cell_contents")
        cellvar = CellVar(tx.ctx.wrap(contents, source))
        cellvar.real = True
        cells.append(cellvar)
    return tuple(cells)


def inline(tx, code, f_globals, args, kwargs, defaults, kwdefaults, closure, globals_source):
    from refcomp.tracer.frame import InstructionTranslator, bind_arguments

    locals_ = bind_arguments(code, list(args), dict(kwargs), tuple(defaults), dict(kwdefaults))
    cells = dict(zip(code.co_freevars, closure))
    child = InstructionTranslator(tx.ctx, code, f_globals, tx.f_builtins, locals_, cells,
                                  parent=tx, globals_source=globals_source)
    return child.run()


def _generator_expression(tx, fn: FunctionVar, args) -> GeneratorVar:
    """`(e for x in it)`: a generator advanced by its consumer (Note [Generator
    expressions], refcomp/tracer/values.py)."""
    from refcomp.tracer.frame import InstructionTranslator, bind_arguments

    locals_ = bind_arguments(fn.code, list(args), {}, (), {})
    cells = dict(zip(fn.code.co_freevars, fn.closure))
    child = InstructionTranslator(tx.ctx, fn.code, fn.f_globals, tx.f_builtins, locals_, cells,
                                  parent=tx, globals_source=fn.globals_source, generator=True)
    return GeneratorVar(child)


def _call_method(tx, m: MethodVar, args, kwargs) -> VT:
    self_vt = m.self_vt
    if isinstance(self_vt, TensorVar):
        method = getattr(torch.Tensor, m.name, None)
        if method is not None and torch_table.has_entry(method):
            return _call_torch_or_opaque(tx, method, [self_vt] + list(args), kwargs)
        if method is not None and opaque.opaque_name(method) is not None:
            return opaque.call_opaque(tx.ctx, method, [self_vt] + list(args), kwargs)
        if isinstance(method, types.FunctionType):  # Python-level (torch/_tensor.py)
            return call_function(tx, ConstVar(method), [self_vt] + list(args), kwargs)
        raise Unsupported(UNSUPPORTED_TENSOR_METHOD, f"Tensor.{m.name}")
    if isinstance(self_vt, (TupleVar, ListVar, DictVar)):
        return _container_method(tx, self_vt, m.name, args, kwargs)
    if isinstance(self_vt, classes.FunctionCtxVar):  # ctx.save_for_backward(...): no grad
        return self_vt.call(m.name, args)
    if isinstance(self_vt, OpaqueVar):  # a list/dict the code only mutates
        effects.record(tx, "method", self_vt, m.name, args, kwargs,
                       what=f"{self_vt.source.name()}.{m.name}(...)")
        return ConstVar(None)
    if effects.is_logger_method(self_vt, m.name):  # logger.warning(...): after the graph
        effects.record(tx, "method", self_vt, m.name, [effects.snapshot(a) for a in args],
                       {k: effects.snapshot(v) for k, v in kwargs.items()},
                       what=f"{self_vt.source.name() if self_vt.source else 'logger'}"
                            f".{m.name}(...)")
        return ConstVar(None)
    if isinstance(self_vt, ConstVar) and isinstance(self_vt.value, contextvars.ContextVar):
        return _context_var_method(tx, self_vt, m.name, args, kwargs)
    if isinstance(m.fn, types.FunctionType):
        return call_function(tx, class_attr(tx, self_vt, m.name, m.fn),
                             [self_vt] + list(args), kwargs)
    raise Unsupported(UNSUPPORTED_CALL, f"method {m.name} of {self_vt!r}")


# Note [Context variables]: transformers' `capture_outputs` wraps every model forward in
# `token = var.set(collected); try: forward finally: var.reset(token)` (a ContextVar, via
# CompileableContextVar, when not under Dynamo).  `set` is a side effect: it is recorded
# for replay after the graph and returns a token the trace holds; `get` then reads the
# value set; `reset` of the newest token of that variable undoes the set, so the recorded
# set is dropped and neither runs (the pair leaves the context as it found it, and no
# replayed effect reads a context variable).  A token that is never reset leaves the set
# to be replayed (eager's state after the call); a token live at a graph break cannot be
# rebuilt (Refused: the frame runs as the break machinery decides for any such value);
# `get` with no traced set, or `reset` of any other token, is RB004.
def _context_var_method(tx, var: ConstVar, name: str, args, kwargs) -> VT:
    tx.ctx.guard_identity(var)
    pending = [t for t in tx.ctx.context_tokens if t.var.value is var.value and not t.reset]
    if id(var.value) in tx.ctx.context_reset_real and name != "set":
        raise Unsupported(UNSUPPORTED_CALL, f"ContextVar.{name} after a replayed reset")
    if name == "set" and len(args) == 1 and not kwargs:
        effects.record(tx, "method", var, "set", args, what=f"{var.source.name()}.set(...)"
                       if var.source is not None else "ContextVar.set(...)")
        token = ContextTokenVar(var, args[0], tx.ctx.effects[-1])
        tx.ctx.context_tokens.append(token)
        return token
    if name == "reset" and len(args) == 1 and not kwargs and pending and \
            args[0] is pending[-1] and any(e is args[0].effect for e in tx.ctx.effects):
        token = args[0]
        tx.ctx.effects[:] = [e for e in tx.ctx.effects if e is not token.effect]
        token.reset = True
        return ConstVar(None)
    if name == "get" and len(args) <= 1 and not kwargs and pending:
        return pending[-1].value
    if name == "reset" and len(args) == 1 and not kwargs and not pending and \
            isinstance(args[0], ConstVar) and args[0].source is not None and \
            isinstance(args[0].value, contextvars.Token):
        # A real token (its set ran before this frame, or at a break): replayed after the
        # graph like any other effect; nothing traced reads the variable afterwards.
        effects.record(tx, "method", var, "reset", args, what="ContextVar.reset(...)")
        tx.ctx.context_reset_real.add(id(var.value))
        return ConstVar(None)
    raise Unsupported(UNSUPPORTED_CALL, f"ContextVar.{name} of a context variable the trace did not"
                               " set (or of another token)")


def class_attr(tx, obj: VT, name: str, value) -> VT:
    """`type(obj).name` (a method the trace calls), read from the object's class so that
    replacing it on the class (`M.forward = other`) is guarded like any other read."""
    if obj.source is None and type(obj) is MadeObjectVar and \
            getattr(type(obj.value), name, None) is value:  # Note [Deep copies]
        return tx.ctx.wrap(value, AttrSource(copies.class_source(type(obj.value)), name))
    if obj.source is None or getattr(type(obj.value), name, None) is not value:
        return ConstVar(value)
    cls = DerivedSource(obj.source, type, "type({})")
    return tx.ctx.wrap(value, AttrSource(cls, name))


def _container_method(tx, obj, name, args, kwargs) -> VT:
    if isinstance(obj, ModelOutputVar):
        if name == "to_tuple" and own_to_tuple(obj.cls) is not None:
            return call_function(tx, ConstVar(own_to_tuple(obj.cls)), [obj] + list(args),
                                 kwargs)
        if name == "to_tuple" and not args and not kwargs:
            return TupleVar(list(obj.items.values()))
        if name not in ("keys", "values", "items", "get"):  # pop/update... raise in eager
            raise Unsupported(UNSUPPORTED_CALL, f"{obj.cls.__name__}.{name}")
        if name == "get" and args and not kwargs:
            key = model_output_key(obj.cls, as_python(require_const(tx, args[0], "key")))
            return obj.items.get(key, args[1] if len(args) > 1 else ConstVar(None))
    if isinstance(obj, DictVar):
        if name == "items":
            return ListVar([TupleVar([ConstVar(k), v]) for k, v in obj.items.items()])
        if name == "keys":
            return ListVar([ConstVar(k) for k in obj.items])
        if name == "values":
            return ListVar(list(obj.items.values()))
        if name == "get":
            key = as_python(args[0])
            default = args[1] if len(args) > 1 else ConstVar(None)
            return obj.items.get(key, default)
    if isinstance(obj, ListVar) and name == "copy" and not args and not kwargs:
        return ListVar(list(obj.items))  # a new list of the same items (swin_t)
    if isinstance(obj, DictVar) and name == "copy" and not args and not kwargs:
        return DictVar(dict(obj.items))
    if isinstance(obj, (ListVar, TupleVar)):
        if name == "index" and not kwargs:
            return ConstVar([as_python(i) for i in obj.items].index(as_python(args[0])))
        if name == "count" and not kwargs:
            return ConstVar([as_python(i) for i in obj.items].count(as_python(args[0])))
    if isinstance(obj, ListVar) and name in ("append", "extend", "insert", "pop", "clear",
                                             "reverse") and not kwargs:
        if name == "extend":
            args = [ListVar(iterate(tx, args[0]))]
        if obj.source is not None:  # Note [Replayed side effects]
            effects.record(tx, "method", obj, name, args,
                           what=f"{obj.source.name()}.{name}(...)")
        try:
            if name == "append":
                obj.items.append(args[0])
            elif name == "extend":
                obj.items.extend(args[0].items)
            elif name == "insert":
                obj.items.insert(as_python(args[0]), args[1])
            elif name == "clear":
                obj.items.clear()
            elif name == "reverse":
                obj.items.reverse()
            else:
                return obj.items.pop(*(as_python(a) for a in args))
        except (IndexError, TypeError) as e:
            raise Unsupported(TRACE_EXCEPTION, f"list.{name}: {e}") from None
        return ConstVar(None)
    if isinstance(obj, DictVar) and name in ("pop", "clear", "update", "setdefault") and \
            all(_is_constant(a) for a in args[:1]) and not (name == "update" and kwargs):
        key = as_python(args[0]) if args else None
        if name == "update" and not isinstance(args[0], DictVar):
            raise Unsupported(INEXPRESSIBLE_OP, "dict.update with a non-dict")
        if obj.source is not None:  # Note [Replayed side effects]
            effects.record(tx, "method", obj, name, args,
                           what=f"{obj.source.name()}.{name}(...)")
        if name == "clear":
            obj.items.clear()
        elif name == "update":
            obj.items.update(args[0].items)
        elif name == "setdefault":
            return obj.items.setdefault(key, args[1] if len(args) > 1 else ConstVar(None))
        elif key in obj.items:
            return obj.items.pop(key)
        elif len(args) > 1:
            return args[1]
        else:
            raise Unsupported(TRACE_EXCEPTION, f"KeyError {key!r}")
        return ConstVar(None)
    raise Unsupported(INEXPRESSIBLE_OP, f"{obj.python_type().__name__}.{name}")


def _call_torch_or_opaque(tx, fn, args, kwargs) -> VT:
    """A table entry, or -- where the entry cannot express these arguments (RB013) -- the
    same call as one opaque node (spec/tracer.md, "Opaque torch calls")."""
    try:
        return torch_table.call_torch(tx.ctx, fn, args, kwargs)
    except Unsupported as e:
        if e.rid != INEXPRESSIBLE_OP or torch_table.TABLE[fn].host:
            raise
        if isinstance(fn, types.FunctionType):  # F.adaptive_avg_pool2d: trace its Python
            try:
                _check_inlinable(fn)
            except Unsupported:
                raise e from None
            src = ConstSource(fn, fn.__qualname__)
            tx.ctx.wrap(fn.__code__, AttrSource(src, "__code__"))
            return inline(tx, fn.__code__, fn.__globals__, args, kwargs,
                          _wrap_defaults(tx, fn, src), _wrap_kwdefaults(tx, fn, src),
                          _real_closure(tx, fn, src), _GlobalsDict(fn))
        if opaque.opaque_name(fn) is None:
            raise
    return opaque.call_opaque(tx.ctx, fn, args, kwargs)


def _grad_mode_call(tx, value, args, kwargs):
    if value is torch.no_grad or value is torch.enable_grad:
        return GradModeVar(value is torch.enable_grad)
    if value is torch.set_grad_enabled:
        mode = bool(as_python(args[0] if args else kwargs["mode"]))
        previous = tx.ctx.grad_enabled
        tx.ctx.set_grad_enabled(mode)
        return GradModeVar(mode, applied=True, previous=previous)
    if value is torch.is_grad_enabled:
        return ConstVar(tx.ctx.grad_enabled)
    return None


# --- builtins that see symbolic values ------------------------------------------------------
def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, (TupleVar, ListVar, DictVar)):
        return ConstVar(len(obj.items))
    if isinstance(obj, ObjectVar):
        return objects.call_dunder(tx, obj, "__len__")
    if isinstance(obj, TensorVar):
        if obj.meta.dim() == 0:
            raise Unsupported(TRACE_EXCEPTION, "len() of a 0-d tensor")
        return ConstVar(obj.value.type.shape[0])
    if isinstance(obj, ConstVar) and isinstance(obj.value, (
            torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)):
        tx.ctx.guard_module_keys(obj)
    elif isinstance(obj, ConstVar) and obj.source is not None and not isinstance(
            obj.value, CONSTANT_TYPES) and type(obj.value) not in (set, frozenset):
        n = _fold(len, obj.value)
        tx.ctx.guard_fact(obj.source, len, "len({})", n.value)
        return n
    return _fold(len, as_python(obj))


def _range_like(fn):
    def handler(tx, args, kwargs):
        return ConstVar(fn(*[as_python(require_const(tx, a, "range bound")) for a in args]))
    return handler


def _enumerate(tx, args, kwargs):
    start = as_python(args[1]) if len(args) > 1 else as_python(kwargs.get("start",
                                                                          ConstVar(0)))
    return ListVar([TupleVar([ConstVar(i + start), v])
                    for i, v in enumerate(iterate(tx, args[0]))])


def _zip(tx, args, kwargs):
    strict = as_python(kwargs.pop("strict", ConstVar(False)))
    if kwargs:
        raise Unsupported(TRACE_EXCEPTION,
                          f"zip() got an unexpected keyword {next(iter(kwargs))!r}")
    columns = [iterate(tx, a) for a in args]
    if strict and len({len(c) for c in columns}) > 1:
        raise Unsupported(TRACE_EXCEPTION, "zip(strict=True) over iterables of different lengths")
    return ListVar([TupleVar(list(row)) for row in zip(*columns)])


def _all_any(stop_on: bool):
    """all()/any(): items are asked for one at a time and the scan stops where eager's does
    (a generator's later items are never traced); the truth of a tensor is RB003."""
    def handler(tx, args, kwargs):
        (obj,) = args
        source = obj if isinstance(obj, GeneratorVar) else IteratorVar(iterate(tx, obj))
        while (item := source.next()) is not None:
            if truth(tx, item) is stop_on:
                return ConstVar(stop_on)
        return ConstVar(not stop_on)
    return handler


def _expect_true(tx, args, kwargs):
    """torch.fx.experimental.symbolic_shapes.expect_true(b): b on a Python bool (a size
    relation is decided, and guarded, like an `if`)."""
    value = args[0] if args else kwargs["a"]
    if isinstance(value, TensorVar) or not (_symbolic(value) or isinstance(
            as_python(value), bool)):
        raise Unsupported(TRACE_EXCEPTION, f"expect_true of {value!r}: eager raises AssertionError")
    return ConstVar(truth(tx, value))


def _filter(tx, args, kwargs):
    """filter(fn, it), evaluated when made; a `fn` that records a side effect is refused
    (eager's filter is lazy, so the effects' order could differ)."""
    fn, items = args[0], iterate(tx, args[1])
    before = len(tx.ctx.effects)
    kept = [i for i in items if truth(tx, i if isinstance(fn, ConstVar) and fn.value is None
                                      else call_function(tx, fn, [i], {}))]
    if len(tx.ctx.effects) != before:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                          "filter() with a function that has side effects")
    return IteratorVar(kept)


def _map(tx, args, kwargs):
    """map(fn, *its), evaluated when made (as filter above)."""
    if kwargs or len(args) < 2:
        raise Unsupported(TRACE_EXCEPTION, "map() needs a function and an iterable")
    fn, columns = args[0], [iterate(tx, a) for a in args[1:]]
    before = len(tx.ctx.effects)
    items = [call_function(tx, fn, list(row), {}) for row in zip(*columns)]
    if len(tx.ctx.effects) != before:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "map() with a function that has side effects")
    return IteratorVar(items)


def _type(tx, args, kwargs):
    """type(obj): a tensor made by the trace is a torch.Tensor; a graph input's exact type
    (Tensor or Parameter) is pinned by its TENSOR_MATCH guard."""
    if len(args) != 1 or kwargs:  # type(name, bases, namespace) of constants: folded
        if not all(_is_constant(v) for v in list(args) + list(kwargs.values())):
            raise Unsupported(UNSUPPORTED_CALL, "type() making a class of traced values")
        return _fold(type, *[as_python(a) for a in args],
                     **{k: as_python(v) for k, v in kwargs.items()})
    (obj,) = args
    if isinstance(obj, TensorVar):
        example = tx.ctx.examples.get(obj.source.name()) if obj.source is not None else None
        return ConstVar(type(example) if example is not None else torch.Tensor)
    if isinstance(obj, ConstVar):
        return ConstVar(type(obj.value))
    try:
        return ConstVar(obj.python_type())
    except NotImplementedError:
        raise Unsupported(UNSUPPORTED_CALL, f"type() of {obj!r}") from None


def _reduce(tx, args, kwargs):
    """functools.reduce(fn, it[, initial]): the calls unrolled in order."""
    if kwargs or len(args) not in (2, 3):
        raise Unsupported(INEXPRESSIBLE_OP, "functools.reduce with unusual arguments")
    items = iterate(tx, args[1])
    if len(args) == 3:
        items = [args[2]] + items
    if not items:
        raise Unsupported(TRACE_EXCEPTION, "reduce() of empty iterable with no initial value")
    acc = items[0]
    for item in items[1:]:
        acc = call_function(tx, args[0], [acc, item], {})
    return acc


def _accumulate(tx, args, kwargs):
    """itertools.accumulate(it[, fn][, initial=...]): the running results, unrolled
    (torch.unravel_index); fn defaults to +."""
    fn = args[1] if len(args) > 1 else kwargs.get("func", ConstVar(None))
    if len(args) > 2 or set(kwargs) - {"func", "initial"}:
        raise Unsupported(INEXPRESSIBLE_OP, "itertools.accumulate with unusual arguments")
    if isinstance(fn, ConstVar) and fn.value is None:
        fn = ConstVar(operator.add)
    items = iterate(tx, args[0])
    initial = kwargs.get("initial", ConstVar(None))
    if not (isinstance(initial, ConstVar) and initial.value is None):
        items = [initial] + items
    out = items[:1]
    for item in items[1:]:
        out.append(call_function(tx, fn, [out[-1], item], {}))
    return IteratorVar(out)


def _broadcast_shapes(tx, args, kwargs):
    """torch.broadcast_shapes of constant shapes: computed now (its Python reads
    torch.fx's nested-int helpers, on the inline skip list)."""
    shapes = [as_python(a) for a in args] if not kwargs and all(
        _is_constant(a) for a in args) else None
    if shapes is None:
        raise Unsupported(INEXPRESSIBLE_OP,
                          "torch.broadcast_shapes of sizes not known while tracing")
    try:
        got = torch.broadcast_shapes(*shapes)
    except RuntimeError as e:
        raise Unsupported(TRACE_EXCEPTION, f"broadcast_shapes: RuntimeError: {e}") from None
    return TupleVar([ConstVar(int(n)) for n in got], cls=torch.Size)


def _torch_size(tx, args, kwargs):
    """torch.Size(sizes): a tuple of (possibly symbolic) sizes of class torch.Size."""
    if kwargs or len(args) > 1:
        raise Unsupported(INEXPRESSIBLE_OP, "torch.Size with unusual arguments")
    items = iterate(tx, args[0]) if args else []
    if any(isinstance(i, TensorVar) for i in items):
        raise Unsupported(TENSOR_TO_PYTHON, "torch.Size of tensors")
    return TupleVar(items, cls=torch.Size)


def _tensor_getitem(tx, args, kwargs):
    """torch.Tensor.__getitem__(t, idx) called by name: `t[idx]`."""
    if len(args) != 2 or kwargs or not isinstance(args[0], TensorVar):
        raise Unsupported(INEXPRESSIBLE_OP, "Tensor.__getitem__ called with unusual arguments")
    return getitem(tx, args[0], args[1])


def _next(tx, args, kwargs):
    """next(it[, default]) on an iterator the trace made (a generator expression, a loop's
    iterator)."""
    if kwargs or not args or not isinstance(args[0], (IteratorVar, GeneratorVar)):
        raise Unsupported(INEXPRESSIBLE_OP, "next() of an iterator the trace did not make")
    item = args[0].next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise Unsupported(TRACE_EXCEPTION, "next() of an exhausted iterator: StopIteration")
    return item


def _repeat(tx, args, kwargs):
    """itertools.repeat(x, n) with a constant n: n references to x (torch's `_ntuple`)."""
    if len(args) + len(kwargs) != 2:
        raise Unsupported(INEXPRESSIBLE_OP,
                          "itertools.repeat without a count (an endless iterator)")
    value = args[0] if args else kwargs["object"]
    times = as_python(args[1] if len(args) > 1 else kwargs["times"])
    return IteratorVar([value] * max(int(times), 0))


def _list(tx, args, kwargs):
    return ListVar(iterate(tx, args[0]) if args else [])


def _tuple(tx, args, kwargs):
    return TupleVar(iterate(tx, args[0]) if args else [])


def _reversed(tx, args, kwargs):
    return ListVar(list(reversed(iterate(tx, args[0]))))


def _isinstance(tx, args, kwargs):
    obj, cls = args
    # No instance of a class made in the frame exists while tracing (making one breaks).
    parts = cls.items if isinstance(cls, TupleVar) else [cls]
    if any(isinstance(c, classes.ClassVar) for c in parts):
        rest = [c for c in parts if not isinstance(c, classes.ClassVar)]
        return _isinstance(tx, [obj, TupleVar(rest)], {}) if rest else ConstVar(False)
    cls = as_python(cls)
    if isinstance(obj, TensorVar):
        return ConstVar(issubclass(torch.Tensor, cls) if isinstance(cls, type) else any(
            issubclass(torch.Tensor, c) for c in cls))
    if isinstance(obj, ConstVar):
        return ConstVar(isinstance(obj.value, cls))
    return ConstVar(issubclass(obj.python_type(), cls) if isinstance(cls, type) else any(
        issubclass(obj.python_type(), c) for c in cls))


def _getattr_builtin(tx, args, kwargs):
    name = as_python(args[1])
    if len(args) > 2 and not _has_attr(tx, args[0], name):
        return args[2]  # the absence is guarded: setting the attribute later recompiles
    return load_attr(tx, args[0], name)


def _has_attr(tx, obj: VT, name: str) -> bool:
    """hasattr(obj, name); on a sourced object the answer is guarded."""
    if isinstance(obj, TensorVar):
        return hasattr(obj.meta, name)
    if isinstance(obj, ObjectVar):
        return objects.has_attr(obj, name)
    if not isinstance(obj, ConstVar):
        return hasattr(obj.python_type(), name)
    result = hasattr(obj.value, name)
    if not isinstance(obj.value, CONSTANT_TYPES) and not (
            isinstance(obj.value, types.ModuleType) and obj.value in TRUSTED_MODULES):
        tx.ctx.guard_fact(obj.source, lambda o, n=name: hasattr(o, n),
                          f"hasattr({{}}, {name!r})", result)
    return result


def _setattr_builtin(tx, args, kwargs):
    """`setattr(obj, name, value)` on an object the frame owns (Note [Deep copies], Note
    [Objects made in the frame]); on anything else a break, as before."""
    if len(args) != 3 or kwargs:
        raise Unsupported(TRACE_EXCEPTION, "setattr() takes three arguments")
    obj, name = args[0], as_python(require_const(tx, args[1], "attribute name"))
    if type(obj) is MadeObjectVar and not isinstance(obj.value, torch.nn.Module):
        copies.set_attr(tx, obj, name, args[2])
    elif isinstance(obj, ObjectVar):
        objects.store_attr(obj, name, args[2])
    else:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"setattr on {_describe_vt(obj)}")
    return ConstVar(None)


def _delattr_builtin(tx, args, kwargs):
    """`delattr(obj, name)`, `del obj.name`: as `_setattr_builtin`."""
    if len(args) != 2 or kwargs:
        raise Unsupported(TRACE_EXCEPTION, "delattr() takes two arguments")
    obj, name = args[0], as_python(require_const(tx, args[1], "attribute name"))
    if type(obj) is MadeObjectVar and not isinstance(obj.value, torch.nn.Module):
        copies.del_attr(tx, obj, name)
    elif isinstance(obj, ObjectVar):
        objects.del_attr(obj, name)
    else:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                          f"deleting attribute {name!r} of {_describe_vt(obj)}")
    return ConstVar(None)


def _hasattr(tx, args, kwargs):
    return ConstVar(_has_attr(tx, args[0], as_python(args[1])))


def _minmax(fn, sym):
    """Builtin min/max as CPython runs them: the first item, replaced by each later one
    whose key compares `sym` (">" for max, "<" for min) to the best so far; the result
    is that operand itself.  A comparison of tensors needs their values: RB003, and the
    call then runs in CPython (Python's answer: the same object, its dtype, NaN ordered
    as `>` orders it, "ambiguous" for a multi-element tensor)."""
    def handler(tx, args, kwargs):
        unknown = set(kwargs) - {"key", "default"}
        if unknown or not args:
            raise Unsupported(TRACE_EXCEPTION, f"{fn.__name__}() arguments {sorted(unknown)}")
        items = iterate(tx, args[0]) if len(args) == 1 else list(args)
        key = kwargs.get("key")
        if key is not None and isinstance(key, ConstVar) and key.value is None:
            key = None
        if not items:
            if "default" in kwargs and len(args) == 1:
                return kwargs["default"]
            raise Unsupported(TRACE_EXCEPTION, f"{fn.__name__}() of an empty sequence")
        if key is None and not any(isinstance(i, TensorVar) for i in items):
            return _fold(fn, [as_python(i) for i in items])
        keyed = (lambda item: item) if key is None else \
            (lambda item: call_function(tx, key, [item], {}))
        best, best_key = items[0], keyed(items[0])
        for item in items[1:]:
            item_key = keyed(item)
            compared = binary(tx, sym, item_key, best_key)
            if isinstance(compared, TensorVar):
                raise Unsupported(TENSOR_CONTROL_FLOW, f"{fn.__name__}() compares tensor values")
            if truth(tx, compared):
                best, best_key = item, item_key
        return best
    return handler


def _sum(tx, args, kwargs):
    items = iterate(tx, args[0])
    total = args[1] if len(args) > 1 else ConstVar(0)
    for item in items:
        total = binary(tx, "+", total, item)
    return total


def _to_python_number(fn):
    def handler(tx, args, kwargs):
        if args and isinstance(args[0], TensorVar):
            raise Unsupported(TENSOR_TO_PYTHON, f"{fn.__name__}(tensor)")
        # int(size) of a dynamic size is a Python number: specialised, with a guard
        # `Eq(s0, 6)` (spec/guards.md, "Dynamic sizes").
        values = [as_python(a) for a in args]
        values = [tx.ctx.specialize(v) if isinstance(v, sympy.Basic) and v.free_symbols
                  else v for v in values]
        return _fold(fn, *values)
    return handler


def _abs(tx, args, kwargs):
    if isinstance(args[0], TensorVar):
        return torch_table.call_torch(tx.ctx, torch.abs, args, {})
    return _fold(abs, as_python(args[0]))



def _callable(tx, args, kwargs):
    """callable(x) of any traced value (transformers' and_masks checks closures made in the
    frame).  Of a sourced object the answer is guarded: it follows the object's type."""
    if len(args) != 1 or kwargs:
        raise Unsupported(TRACE_EXCEPTION, "callable() takes exactly one argument")
    obj = args[0]
    if isinstance(obj, (FunctionVar, MethodVar, PartialVar, classes.ClassVar,
                        classes.StaticMethodVar)):
        return ConstVar(True)
    if isinstance(obj, TensorVar):
        return ConstVar(False)
    if not isinstance(obj, ConstVar):
        try:  # an instance is callable when its class defines __call__
            return ConstVar(any("__call__" in vars(k) for k in obj.python_type().__mro__))
        except NotImplementedError:
            raise Unsupported(UNSUPPORTED_CALL, f"callable() of {_describe_vt(obj)}") from None
    result = callable(obj.value)
    if obj.source is not None and not isinstance(obj.value, CONSTANT_TYPES):
        tx.ctx.guard_fact(obj.source, callable, "callable({})", result)
    return ConstVar(result)


def _signature(tx, args, kwargs):
    """inspect.signature(fn) of a plain Python function, a bound method or a function made
    in the frame (BERT's apply_chunking_to_forward counts its parameters): folded to the
    Signature, which depends only on the function's code and defaults, guarded as for a
    call (the code by identity, the defaults by value).  inspect's own code was traced
    and broke at its isinstance checks."""
    if len(args) != 1 or kwargs:
        raise Unsupported(UNSUPPORTED_CALL, "inspect.signature() with options")
    obj, bound = args[0], False
    if isinstance(obj, MethodVar) and isinstance(obj.fn, types.FunctionType):
        fn, src, bound = obj.fn, ConstSource(obj.fn, obj.fn.__qualname__), True
    elif isinstance(obj, ConstVar) and type(obj.value) is types.FunctionType:
        fn = obj.value
        src = obj.source or ConstSource(fn, fn.__qualname__)
    elif isinstance(obj, FunctionVar):
        if not all(_is_constant(d) for d in list(obj.defaults) + list(obj.kwdefaults.values())):
            raise Unsupported(UNSUPPORTED_CALL,
                              "inspect.signature() of a function whose defaults are"
                                       " traced values")
        fn = types.FunctionType(obj.code, {}, obj.name,
                                tuple(as_python(d) for d in obj.defaults),
                                tuple(types.CellType() for _ in obj.code.co_freevars))
        fn.__kwdefaults__ = {k: as_python(v) for k, v in obj.kwdefaults.items()} or None
        return ConstVar(inspect.signature(fn))
    else:
        raise Unsupported(UNSUPPORTED_CALL, f"inspect.signature() of {_describe_vt(obj)}")
    if any(hasattr(fn, a) for a in ("__signature__", "__wrapped__", "__text_signature__")):
        raise Unsupported(UNSUPPORTED_CALL, f"inspect.signature() of {fn.__qualname__}, which"
                                   " overrides its signature")
    tx.ctx.wrap(fn.__code__, AttrSource(src, "__code__"))  # ID_MATCH, as for a call
    _wrap_defaults(tx, fn, src)
    _wrap_kwdefaults(tx, fn, src)
    sig = inspect.signature(fn)
    if bound:  # a bound method's signature leaves out the argument it is bound to
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return ConstVar(sig)

_BUILTIN_HANDLERS = {
    len: _len, range: _range_like(range), enumerate: _enumerate, zip: _zip, list: _list,
    tuple: _tuple, reversed: _reversed, isinstance: _isinstance, getattr: _getattr_builtin,
    hasattr: _hasattr, setattr: _setattr_builtin, delattr: _delattr_builtin,
    copy.deepcopy: copies.deepcopy, callable: _callable, inspect.signature: _signature,
    min: _minmax(min, "<"), max: _minmax(max, ">"), sum: _sum,
    int: _to_python_number(int), float: _to_python_number(float),
    bool: _to_python_number(bool), abs: _abs, all: _all_any(False), any: _all_any(True),
    dict.get: _dict_get, itertools.repeat: _repeat, filter: _filter, map: _map, type: _type,
    functools.reduce: _reduce, itertools.accumulate: _accumulate,
    torch.broadcast_shapes: _broadcast_shapes, next: _next,
    builtins.__build_class__: classes.build_class,
    staticmethod: classes.staticmethod_call,
    torch.Tensor.__getitem__: _tensor_getitem, torch.Size: _torch_size,
}
# Handlers for functions of modules refcomp does not import (importing them costs seconds):
# matched on (module, qualname) when called.
_NAMED_HANDLERS = {("torch.fx.experimental.symbolic_shapes", "expect_true"): _expect_true,
                   **rng.HANDLERS}
