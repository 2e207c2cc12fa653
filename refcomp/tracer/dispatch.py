"""The table of callable kinds: what a call means, decided by the first kind that matches.

Owns: `KINDS` (ordered records: name, how it matches, its handler or the reason id it
is refused with) and `call_function`, a loop over them.  A new kind of callable is one
record here plus its handler in the module of its topic.  spec/tracer.md's table
"Callable kinds" is generated from `KINDS` (tests/test_spec_tables.py).
"""

from __future__ import annotations

import functools
import types
import weakref
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from refcomp.reasons import (
    DISABLED_FUNCTION,
    INEXPRESSIBLE_OP,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    Raised,
    Unsupported,
)
from refcomp.sources import (
    AttrSource,
    DerivedSource,
)

# torch_ops and tensor_layout register the torch table's entries when imported.
from refcomp.tracer import (  # noqa: F401
    classes,
    complex_ops,
    effects,
    foreach,
    modules,
    objects,
    opaque,
    rng,
    tensor_layout,
    torch_ops,
    torch_table,
)
from refcomp.tracer.attributes import default_getattr, default_setattr, new_super
from refcomp.tracer.builtin_calls import (
    BUILTIN_HANDLERS,
    COMPILING_QUERIES,
    NAMED_HANDLERS,
    NO_OP_CALLS,
    PURE_BUILTINS,
    PURE_FUNCTIONS,
    grad_mode_call,
    is_status_query,
)
from refcomp.tracer.checkpoint import CHECKPOINT, call_checkpoint
from refcomp.tracer.constructors import (
    is_frozen_dataclass,
    is_model_output_class,
    new_exception,
    new_frozen_dataclass,
    new_model_output,
    new_namedtuple,
    new_torch_module,
)
from refcomp.tracer.containers import SET_QUERIES, iterate
from refcomp.tracer.facts import (
    concrete_vt,
    has_symbols,
    hashable,
    is_constant,
    is_torch_function,
    nested_symbols,
    public_name,
)
from refcomp.tracer.inlining import (
    assumed_constant,
    generator_expression,
    inline,
    inline_function,
    unpack_partial,
)
from refcomp.tracer.methods import call_method, call_torch_or_opaque
from refcomp.tracer.operators import OPERATOR_SYMBOL, binary, fold
from refcomp.tracer.values import (
    VT,
    ConstVar,
    ExitVar,
    FunctionVar,
    GeneratorVar,
    IteratorVar,
    ListVar,
    MethodVar,
    NullVar,
    PartialVar,
    as_python,
)


@dataclass(frozen=True)
class CallableKind:
    """One kind of callable: how a call's callee (and, for a few kinds, its arguments) is
    recognized, and what the trace does with the call.  A kind that is refused has no
    handler: its calls raise `Unsupported(refused, ...)`, which breaks the graph there."""

    name: str
    matches: Callable  # (tx, fn: VT, args, kwargs) -> bool
    handle: Optional[Callable]  # (tx, fn: VT, args, kwargs) -> VT
    refused: Optional[str] = None  # a reason id (a constant of refcomp/reasons.py)
    summary: str = ""


def _value(fn: VT):
    return fn.value if isinstance(fn, ConstVar) else _NOT_CONSTANT


_NOT_CONSTANT = object()
_DISABLED_ATTR = "_refcomp_disabled"  # set by refcomp.disable (refcomp/api.py)
_MODULE_CALLS = (torch.nn.Module.__call__, torch.nn.Module._call_impl)
_GRAD_MODE_CALLS = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled,
                    torch.is_grad_enabled)


def _is(*types_):
    return lambda tx, fn, args, kwargs: isinstance(fn, types_)


def _value_is(test):
    """A matcher on the callee's Python value (a ConstVar the trace read)."""
    def matches(tx, fn, args, kwargs):
        value = _value(fn)
        return value is not _NOT_CONSTANT and test(value)
    return matches


def _constant_args(args, kwargs) -> bool:
    return all(is_constant(v) for v in list(args) + list(kwargs.values()))


def _fold_call(tx, fn, args, kwargs):
    if nested_symbols(fn.value, [as_python(a) for a in args],
                                {k: as_python(v) for k, v in kwargs.items()}):
        args = [concrete_vt(tx.ctx, a) for a in args]
        kwargs = {k: concrete_vt(tx.ctx, v) for k, v in kwargs.items()}
    return fold(fn.value, *[as_python(a) for a in args], ctx=tx.ctx,
                **{k: as_python(v) for k, v in kwargs.items()})


# --- handlers of the kinds that need more than one line ---------------------------------------
def _exit_grad_mode(tx, fn, args, kwargs):
    tx.ctx.set_grad_enabled(fn.previous)
    return ConstVar(None)


def _call_partial_made_here(tx, fn, args, kwargs):
    # partial(f, *a, **k)(*b, **l) is f(*a, *b, **k, **l)
    return call_function(tx, fn.fn, fn.args + list(args), {**fn.kwargs, **kwargs})


def _call_bound_method(tx, fn, args, kwargs):
    value = fn.value
    return call_function(tx, MethodVar(value.__func__, tx.ctx.wrap(value.__self__, None),
                                       value.__name__), args, kwargs)


def _is_namedtuple_class(value) -> bool:
    return isinstance(value, type) and issubclass(value, tuple) and \
        hasattr(value, "_fields") and hasattr(value, "_make") and \
        (getattr(value.__new__, "__module__", None) or "").startswith("namedtuple_")


def _deref(ref):
    return ref()


def _call_weakref(tx, fn, args, kwargs):
    # ref(): the referent, read through the ref (guarded like any other read: the ref
    # dying or pointing elsewhere fails the guard on what the trace saw).
    target = fn.value()
    if fn.source is None:
        return ConstVar(target)
    return tx.ctx.wrap(target, DerivedSource(fn.source, _deref, "{}()"))


def _is_constant_method(tx, fn, args, kwargs) -> bool:
    # `attn_implementation.startswith("paged|")`: a method of an immutable constant
    # (guarded by value where it was read) answers the same every time: folded.
    value = _value(fn)
    return isinstance(value, types.BuiltinMethodType) and \
        (type(value.__self__) in (str, bytes, int, float, bool, tuple, frozenset) or
         type(value.__self__) is set and value.__name__ in SET_QUERIES) and \
        _constant_args(args, kwargs)


def _call_status_query(tx, fn, args, kwargs):
    value = fn.value
    if (value.__module__, value.__qualname__) in COMPILING_QUERIES:
        return ConstVar(True)  # as under Dynamo: Note [Status queries]
    try:
        return ConstVar(value())
    except Exception as e:  # (torch.cuda's query on a CPU build raises): eager raises it
        raise Raised(e, f"{public_name(value)} raises here", UNSUPPORTED_CALL) from None


def _is_lru_cache_wrapper(value) -> bool:
    return type(value) is functools._lru_cache_wrapper and \
        isinstance(getattr(value, "__wrapped__", None), types.FunctionType)


def _call_lru_cache_wrapper(tx, fn, args, kwargs):  # Note [lru_cache wrappers]
    value = fn.value
    if getattr(value.__wrapped__, "_dynamo_marked_constant", False):
        return assumed_constant(value, args, kwargs)
    src = None if fn.source is None else AttrSource(fn.source, "__wrapped__")
    before = len(tx.ctx.effects)
    result = call_function(tx, ConstVar(value.__wrapped__, src), args, kwargs)
    if len(tx.ctx.effects) != before:  # the cache decides whether they happen: a break
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"{public_name(value.__wrapped__)} under"
                                                    " lru_cache has side effects")
    return result


def _is_pure_call_on_constants(tx, fn, args, kwargs) -> bool:
    value = _value(fn)
    pure_method = isinstance(value, types.BuiltinMethodType) and type(
        getattr(value, "__self__", None)) in (str, bytes) or value in (dict, set, frozenset)
    if not (pure_method or hashable(value) and (value in PURE_BUILTINS or
                                                 value in PURE_FUNCTIONS)):
        return False
    drained = [a for a in args if isinstance(a, (GeneratorVar, IteratorVar))]
    return bool(drained) or _constant_args(args, kwargs)


def _call_pure_on_constants(tx, fn, args, kwargs):
    value = fn.value
    # An iterator the trace made (a generator expression) is drained first, in order.
    args = [ListVar(iterate(tx, a)) if isinstance(a, (GeneratorVar, IteratorVar)) else a
            for a in args]
    if not _constant_args(args, kwargs):
        return _call_after(tx, fn, args, kwargs, _PURE_ON_CONSTANTS)
    if value in (set, frozenset, dict, sorted) and has_symbols([as_python(a) for a in args]):
        # {s0, 3}, sorted([s0, 3]): the answer depends on the size's value
        raise Unsupported(INEXPRESSIBLE_OP, f"{value.__name__}() of dynamic sizes")
    return _fold_call(tx, fn, args, kwargs)


def _record_replayed_call(tx, fn, args, kwargs):  # print, warnings.warn: after the graph
    effects.record(tx, "call", fn, None, [effects.snapshot(a) for a in args],
                   {k: effects.snapshot(v) for k, v in kwargs.items()},
                   what=f"{getattr(fn.value, '__qualname__', fn.value)}(...)")
    return ConstVar(None)


def _call_object(tx, fn, args, kwargs):
    # `obj(x)` is `type(obj).__call__(obj, x)`, traced like any method (an instance
    # attribute named __call__ is not what CPython calls).
    return call_function(tx, MethodVar(type(fn.value).__call__, fn, "__call__"), args, kwargs)


def _is_callable_object(value) -> bool:
    return not isinstance(value, type) and \
        isinstance(getattr(type(value), "__call__", None), types.FunctionType)


# --- the table --------------------------------------------------------------------------------
def _kind(name, matches, handle=None, refused=None, summary=""):
    return CallableKind(name, matches, handle, refused, summary)


KINDS: tuple = (
    _kind("generator expression",
          lambda tx, fn, a, k: isinstance(fn, FunctionVar) and fn.code.co_name == "<genexpr>",
          lambda tx, fn, a, k: generator_expression(tx, fn, a),
          summary="a generator the consumer advances (Note [Generator expressions])"),
    _kind("function made in the frame", _is(FunctionVar),
          lambda tx, fn, a, k: inline(tx, fn.code, fn.f_globals, a, k, fn.defaults,
                                      fn.kwdefaults, fn.closure, fn.globals_source),
          summary="a `def` or lambda the trace executed: inlined"),
    _kind("optimizer _init_group", foreach.is_init_group,
          lambda tx, fn, a, k: foreach.init_group(tx, fn, a, k),
          summary="run for real while tracing; its lists are sourced inputs"
                  " (Note [Optimizer steps])"),
    _kind("Module.parameters", foreach.is_module_parameters,
          lambda tx, fn, a, k: foreach.module_parameters(tx, fn, a, k),
          summary="the module tree's parameters, each read as an attribute"
                  " (Note [Optimizer steps])"),
    _kind("bound method", _is(MethodVar), lambda tx, fn, a, k: call_method(tx, fn, a, k),
          summary="`obj.m(...)`: by the receiver (refcomp/tracer/methods.py)"),
    _kind("end of a grad-mode block", _is(ExitVar), _exit_grad_mode,
          summary="leaving `with torch.no_grad():` restores the grad mode"),
    _kind("end of freeze_rng_state", _is(rng.RngRestoreVar),
          lambda tx, fn, a, k: fn.exit(tx.ctx),
          summary="leaving `with freeze_rng_state():` restores the generator"),
    _kind("Function.apply of a class made in the frame", _is(classes.ApplyVar),
          lambda tx, fn, a, k: classes.apply(tx, fn, a, k),
          summary="forward inlined under no_grad (Note [Classes made in the frame])"),
    _kind("class made in the frame", _is(classes.ClassVar), refused=UNSUPPORTED_CALL,
          summary="its instances are not traced"),
    _kind("partial made in the frame", _is(PartialVar), _call_partial_made_here,
          summary="`partial(f, *a)(*b)` is `f(*a, *b)`"),
    _kind("not a value the trace read",
          lambda tx, fn, a, k: isinstance(fn, NullVar) or not isinstance(fn, ConstVar),
          refused=UNSUPPORTED_CALL, summary="a call of a tensor, a container, an object"),
    _kind("disabled function", _value_is(lambda v: getattr(v, _DISABLED_ATTR, False)),
          refused=DISABLED_FUNCTION, summary="`refcomp.disable(f)`: runs eagerly"),
    _kind("nn.Module", _value_is(lambda v: isinstance(v, torch.nn.Module) and
                                 not modules.overrides_call(type(v))),
          lambda tx, fn, a, k: modules.call_module(tx, fn, a, k),
          summary="its hooks and forward, inlined (refcomp/tracer/modules.py); a class that"
                  " overrides `__call__` is a callable object"),
    _kind("super", _value_is(lambda v: v is super), lambda tx, fn, a, k: new_super(tx, a, k),
          summary="`super()` and `super(C, self)`"),
    _kind("grad mode", _value_is(lambda v: any(v is g for g in _GRAD_MODE_CALLS)),
          lambda tx, fn, a, k: grad_mode_call(tx, fn.value, a, k),
          summary="no_grad, enable_grad, set_grad_enabled, is_grad_enabled"),
    _kind("operator function",
          lambda tx, fn, a, k: hashable(_value(fn)) and _value(fn) in OPERATOR_SYMBOL and
          len(a) == 2 and not k,
          lambda tx, fn, a, k: binary(tx, OPERATOR_SYMBOL[fn.value], *a),
          summary="`operator.mul(a, b)` is `a * b`"),
    _kind("foreach op", _value_is(lambda v: hashable(v) and foreach.is_foreach(v)),
          lambda tx, fn, a, k: foreach.call_foreach(tx, fn.value, a, k),
          summary="`torch._foreach_mul_(xs, c)`: one op per tensor (Note [Foreach ops])"),
    _kind("torch table entry", _value_is(torch_table.has_entry),
          lambda tx, fn, a, k: call_torch_or_opaque(tx, fn.value, a, k),
          summary="an IR builder (refcomp/tracer/torch_ops.py, tensor_layout.py), else one"
                  " opaque node"),
    _kind("checkpoint", _value_is(lambda v: v is CHECKPOINT),
          lambda tx, fn, a, k: call_checkpoint(tx, a, k, call_function),
          summary="traced inline (Note [Checkpoint traced inline])"),
    _kind("functional_call", _value_is(lambda v: any(v is f for f in modules.FUNCTIONAL_CALLS)),
          lambda tx, fn, a, k: modules.functional_call(tx, a, k),
          summary="the module's call with the given tensors read for its own"),
    _kind("builtin with a handler", _value_is(lambda v: _handler(v) is not None),
          lambda tx, fn, a, k: _handler(fn.value)(tx, a, k),
          summary="len, zip, isinstance, max... on symbolic values"
                  " (refcomp/tracer/builtin_calls.py)"),
    _kind("bound method object",
          _value_is(lambda v: isinstance(v, types.MethodType) and
                    isinstance(v.__func__, types.FunctionType)),
          _call_bound_method, summary="`obj.m` read as a value, then called"),
    _kind("the optimizer's graph_break", foreach.is_optimizer_graph_break,
          lambda tx, fn, a, k: ConstVar(None),
          summary="`torch._dynamo.graph_break()` in torch.optim's `_use_grad`: a no-op"
                  " (Note [Optimizer steps])"),
    _kind("function.__get__",
          _value_is(lambda v: isinstance(v, types.MethodWrapperType) and v.__name__ == "__get__"
                    and isinstance(v.__self__, types.FunctionType)),
          lambda tx, fn, a, k: foreach.bind_function(fn.value.__self__, a, k),
          summary="`f.__get__(obj, cls)`: `f` bound to `obj`, a method of the traced value"),
    _kind("namedtuple class", _value_is(_is_namedtuple_class),
          lambda tx, fn, a, k: new_namedtuple(fn.value, a, k),
          summary="a tuple with its class"),
    _kind("weak reference",
          lambda tx, fn, a, k: isinstance(_value(fn), weakref.ReferenceType) and not a and
          not k, _call_weakref, summary="`ref()`: the referent, guarded"),
    _kind("no-op call", _value_is(lambda v: hashable(v) and v in NO_OP_CALLS),
          lambda tx, fn, a, k: ConstVar(NO_OP_CALLS[fn.value](a)),
          summary="torch._dynamo markers and the like"),
    _kind("method of an immutable constant", _is_constant_method, _fold_call,
          summary="`name.startswith(\"x\")`: folded"),
    _kind("status query",
          lambda tx, fn, a, k: is_status_query(_value(fn)) and not a and not k,
          _call_status_query, summary="`torch.compiler.is_compiling()`: answered"
                                      " (Note [Status queries])"),
    _kind("model output class",
          _value_is(lambda v: isinstance(v, type) and is_model_output_class(v)),
          lambda tx, fn, a, k: new_model_output(tx, fn.value, a, k),
          summary="transformers' ModelOutput dataclasses"),
    _kind("builtin exception class",
          _value_is(lambda v: isinstance(v, type) and issubclass(v, BaseException) and
                    v.__module__ == "builtins"),
          lambda tx, fn, a, k: new_exception(tx, fn, a, k),
          summary="`ValueError(...)`, raised or caught later"),
    _kind("lru_cache wrapper", _value_is(_is_lru_cache_wrapper), _call_lru_cache_wrapper,
          summary="the wrapped function, inlined (Note [lru_cache wrappers])"),
    _kind("assumed-constant function",
          _value_is(lambda v: isinstance(v, types.FunctionType) and
                    getattr(v, "_dynamo_marked_constant", False)),
          lambda tx, fn, a, k: assumed_constant(fn.value, a, k),
          summary="`assume_constant_result`: called once, on constants"),
    _kind("Module.__call__", lambda tx, fn, a, k: any(_value(fn) is c for c in _MODULE_CALLS)
          and bool(a) and isinstance(_value(a[0]), torch.nn.Module),
          lambda tx, fn, a, k: modules.call_module(tx, a[0], a[1:], k),
          summary="`super().__call__(x)` in a module class's own `__call__`: the module call"),
    _kind("object.__getattribute__",
          lambda tx, fn, a, k: _value(fn) is object.__getattribute__ and len(a) == 2 and not k,
          lambda tx, fn, a, k: default_getattr(tx, a[0], a[1]),
          summary="object's own attribute lookup (Note [Reads that run user code])"),
    _kind("object.__setattr__",
          lambda tx, fn, a, k: _value(fn) is object.__setattr__ and len(a) == 3 and not k,
          lambda tx, fn, a, k: default_setattr(tx, a[0], a[1], a[2]),
          summary="object's own store into the instance, replayed after the graph"),
    _kind("Python function", _value_is(lambda v: isinstance(v, types.FunctionType)),
          lambda tx, fn, a, k: inline_function(tx, fn.value, fn.source, a, k),
          summary="inlined; code, defaults and closure guarded (refcomp/tracer/inlining.py)"),
    _kind("pure builtin on constants", _is_pure_call_on_constants, _call_pure_on_constants,
          summary="`abs`, `math.sqrt`, `sorted`... of constants: folded"),
    _kind("replayed call", _value_is(effects.is_replayed_call), _record_replayed_call,
          summary="print, warnings.warn: recorded, run after the graph"),
    _kind("functools.partial", lambda tx, fn, a, k: _value(fn) is functools.partial and
          bool(a), lambda tx, fn, a, k: PartialVar(a[0], a[1:], k),
          summary="made here: its parts stay symbolic"),
    _kind("partial object", _value_is(lambda v: type(v) is functools.partial),
          lambda tx, fn, a, k: call_function(tx, unpack_partial(tx, fn), a, k),
          summary="its func, args and keywords read from their sources"),
    _kind("frozen dataclass on constants",
          lambda tx, fn, a, k: is_frozen_dataclass(_value(fn)) and _constant_args(a, k),
          lambda tx, fn, a, k: new_frozen_dataclass(tx, fn.value, a, k),
          summary="a constant object"),
    _kind("opaque torch call", _value_is(lambda v: opaque.opaque_name(v) is not None),
          lambda tx, fn, a, k: opaque.call_opaque(tx.ctx, fn.value, a, k),
          summary="one node typed by its meta kernel (spec/tracer.md, \"Opaque torch calls\")"),
    _kind("custom op",
          _value_is(lambda v: isinstance(v, torch._library.custom_ops.CustomOpDef)),
          lambda tx, fn, a, k: opaque.call_opaque(tx.ctx, fn.value._opoverload, a, k),
          summary="`torch.library.custom_op`: its operator, typed by its fake kernel"),
    _kind("torch module class",
          _value_is(lambda v: isinstance(v, type) and issubclass(v, torch.nn.Module) and
                    is_torch_function(v)),
          lambda tx, fn, a, k: new_torch_module(fn.value, a, k),
          summary="`nn.Linear(...)` made in the frame"),
    _kind("torch or builtin function not in the table",
          _value_is(lambda v: is_torch_function(v) or
                    isinstance(v, types.BuiltinFunctionType)),
          refused=UNSUPPORTED_CALL, summary="its effect on values is unknown"),
    _kind("callable object", _value_is(_is_callable_object), _call_object,
          summary="`type(obj).__call__(obj, ...)`, inlined"),
    _kind("plain class", _value_is(lambda v: isinstance(v, type) and objects.plain_class(v)),
          lambda tx, fn, a, k: objects.new_object(tx, fn, a, k),
          summary="an object made in the frame (Note [Objects made in the frame])"),
    _kind("object.__init__",
          lambda tx, fn, a, k: objects.is_object_init(_value(fn), a, k),
          lambda tx, fn, a, k: ConstVar(None), summary="`super().__init__()` reaching object"),
    _kind("other class", _value_is(lambda v: isinstance(v, type)), refused=UNSUPPORTED_CALL,
          summary="a metaclass `__call__`, `__new__`, `__slots__`, a builtin base..."),
    _kind("anything else", lambda tx, fn, a, k: True, refused=UNSUPPORTED_CALL,
          summary="a call of an object the trace cannot follow"),
)
_PURE_ON_CONSTANTS = next(i for i, kind in enumerate(KINDS)
                          if kind.name == "pure builtin on constants")


def _handler(value):
    special = BUILTIN_HANDLERS.get(value) if hashable(value) else None
    if special is None and isinstance(value, types.FunctionType):
        special = NAMED_HANDLERS.get((value.__module__, value.__qualname__))
    return special


def call_function(tx, fn: VT, args: list, kwargs: dict) -> VT:
    """`fn(*args, **kwargs)`: the first kind in `KINDS` that matches handles it."""
    return _call_after(tx, fn, args, kwargs, -1)


def _call_after(tx, fn, args, kwargs, after: int) -> VT:
    for kind in KINDS[after + 1:]:
        if kind.matches(tx, fn, args, kwargs):
            if kind.handle is None:
                raise Unsupported(kind.refused, _refused_message(kind, fn))
            return kind.handle(tx, fn, args, kwargs)
    raise AssertionError("the last kind matches every call")


def _refused_message(kind: CallableKind, fn: VT) -> str:
    value = _value(fn)
    if isinstance(fn, classes.ClassVar):
        return f"an instance of {fn.name}, a class made in the frame"
    if kind.refused is DISABLED_FUNCTION:
        return f"{getattr(value, '__qualname__', value)}"
    if value is _NOT_CONSTANT:
        return f"call of {fn!r}"
    if isinstance(fn.value, type) and kind.name == "other class":
        return (f"constructing a {value.__qualname__} ({value.__module__}): its class is not"
                " a plain Python class (a metaclass __call__, __new__, __slots__, a builtin"
                " base, its own __setattr__...), so its objects are not traced")
    if kind.name == "torch or builtin function not in the table":
        return f"{public_name(value)} is not in the torch table"
    return f"call of {type(value).__name__} {value!r}"
