"""`copy.deepcopy` inside the traced code (transformers' `config.get_text_config`).

Owns: `deepcopy` (the handler of `copy.deepcopy(x)`), the deep-state fingerprint that
guards the object copied (`deep_state`), the conversion of the copy into symbolic values
(`_fresh`), and the writes the trace makes to a copy it holds as a real object
(`set_attr`, `del_attr`).  Spec: spec/tracer.md, "Deep copies".

Why a copy is computed at trace time, what is guarded and what is refused: Note [Deep
copies] in that section.
"""

from __future__ import annotations

import copyreg
import enum
import types

import torch

from refcomp.reasons import UNREPLAYABLE_SIDE_EFFECT, UNSUPPORTED_CALL, Unsupported
from refcomp.sources import AttrSource, ConstSource
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    ListVar,
    MadeObjectVar,
    ObjectVar,
    TensorVar,
    TupleVar,
    as_python,
)

NODE_LIMIT = 20000  # objects one deep copy may visit before it is refused
_HEAPTYPE = 1 << 9
_ATOMS = (type(None), bool, int, str, bytes, torch.dtype, torch.device, range, type,
          types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


class _NotPlain(Exception):
    pass


def _copied_by_default(cls) -> bool:
    """Does copy.deepcopy copy objects of `cls` by `object.__reduce_ex__` (a new
    `cls.__new__(cls)` whose `__dict__` gets a deep copy of the original's)?"""
    return isinstance(cls, type) and bool(cls.__flags__ & _HEAPTYPE) and \
        cls not in copyreg.dispatch_table and \
        getattr(cls, "__deepcopy__", None) is None and \
        cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__ \
        and getattr(cls, "__getstate__", None) is getattr(object, "__getstate__", None) \
        and getattr(cls, "__setstate__", None) is None and cls.__new__ is object.__new__ \
        and bool(cls.__dictoffset__) and not issubclass(cls, (torch.nn.Module, enum.Enum)) \
        and not any(vars(k).get("__slots__") for k in cls.__mro__)


def _state(value, memo: dict, budget: list):
    """The fingerprint of `value`'s deep state; _NotPlain for what is not plain data."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _NotPlain(f"more than {NODE_LIMIT} objects")
    kind = type(value)
    if kind is float:
        return (float, value.hex())  # by its bits: 0.0 and -0.0, NaN
    if kind is complex:
        return (complex, value.real.hex(), value.imag.hex())
    if kind in (type(None), bool, int, str, bytes, torch.dtype, torch.device, range):
        return (kind, value)
    if kind in _ATOMS or isinstance(value, type):  # deepcopy keeps these: by identity
        return ("is", value)
    if id(value) in memo:  # shared: the copy shares it too
        return ("ref", memo[id(value)])
    memo[id(value)] = len(memo)
    if kind in (tuple, list):
        return (kind, tuple(_state(v, memo, budget) for v in value))
    if kind is dict:
        return (dict, tuple((_state(k, memo, budget), _state(v, memo, budget))
                            for k, v in value.items()))
    if kind in (set, frozenset):
        return (kind, tuple(sorted(_state(v, memo, budget) for v in value)))
    if isinstance(value, torch.Tensor):
        raise _NotPlain("a tensor")
    if _copied_by_default(kind):
        return ("object", kind, tuple((k, _state(v, memo, budget))
                                      for k, v in vars(value).items()))
    raise _NotPlain(f"a {kind.__qualname__}")


def deep_state(value):
    """The guarded fact (Note [Deep copies]); ("not plain",) when it has stopped being
    plain data (the guard then fails, and the call recompiles and breaks)."""
    try:
        return _state(value, {}, [NODE_LIMIT])
    except (_NotPlain, TypeError):  # (TypeError: a set whose items do not sort)
        return ("not plain",)


def _objects(value, out: dict) -> None:
    """Every mutable object reachable from `value` (id -> object)."""
    if type(value) in _ATOMS or isinstance(value, type) or type(value) in (float, complex) \
            or id(value) in out:
        return
    out[id(value)] = value
    if type(value) in (tuple, list, set, frozenset):
        for v in value:
            _objects(v, out)
    elif type(value) is dict:
        for k, v in value.items():
            _objects(k, out)
            _objects(v, out)
    elif hasattr(value, "__dict__"):
        for v in vars(value).values():
            _objects(v, out)


def _check_not_pending(tx, vt: ConstVar) -> None:
    """RB008 if the trace wrote anything reachable from the original that is not yet
    written to the real object (an attribute set, a container mutated: replayed after
    the graph)."""
    ctx = tx.ctx
    reach: dict = {}
    _objects(vt.value, reach)
    written = {k[0] for k in ctx.attr_writes} & reach.keys()
    targets = {e[1].source.name() for e in ctx.effects
               if getattr(e[1], "source", None) is not None}
    stale = written or any(
        ctx.container_claims[i][0] == "mutated" or ctx.container_claims[i][1] in targets
        for i in reach.keys() & ctx.container_claims.keys())
    if stale:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                          f"copy.deepcopy of {vt!r}: the frame wrote to it before"
                                   " (the write is replayed after the graph)")


def deepcopy(tx, args, kwargs):
    """`copy.deepcopy(x)` (Note [Deep copies])."""
    if len(args) != 1 or kwargs:
        memo = args[1] if len(args) > 1 else kwargs.get("memo")
        if len(args) > 2 or set(kwargs) - {"memo"} or not (
                isinstance(memo, ConstVar) and memo.value is None):
            raise Unsupported(UNSUPPORTED_CALL, "copy.deepcopy with a memo")
    return copy_vt(tx, args[0], {})


def copy_vt(tx, vt: VT, memo: dict) -> VT:
    """The deep copy of a symbolic value: containers and objects the trace holds are
    copied symbolically (their contents are what the trace knows), constants at trace
    time."""
    if id(vt) in memo:
        return memo[id(vt)]
    if _constant(vt):  # deepcopy of an immutable value is the value (a size: an int)
        return vt
    if isinstance(vt, TensorVar):  # (Dynamo breaks here too)
        raise Unsupported(UNSUPPORTED_CALL, f"copy.deepcopy of {_name(vt)}, a tensor")
    if isinstance(vt, (ListVar, TupleVar)) and not (isinstance(vt, TupleVar) and
                                                   vt.cls is not tuple):
        out = memo[id(vt)] = type(vt)([])
        out.items = [copy_vt(tx, i, memo) for i in vt.items]
        return out
    if type(vt) is DictVar:
        out = memo[id(vt)] = DictVar({})
        out.items.update({k: copy_vt(tx, v, memo) for k, v in vt.items.items()})
        return out
    if type(vt) is ObjectVar:
        if not _copied_by_default(vt.cls):
            raise Unsupported(UNSUPPORTED_CALL, f"copy.deepcopy of {vt!r}: its class copies itself")
        out = memo[id(vt)] = ObjectVar(vt.cls, vt.cls_vt)
        out.attrs.update({k: copy_vt(tx, v, memo) for k, v in vt.attrs.items()})
        return out
    if type(vt) in (ConstVar, MadeObjectVar):
        return _copy_const(tx, vt)
    raise Unsupported(UNSUPPORTED_CALL, f"copy.deepcopy of {_name(vt)}")


def _constant(vt: VT) -> bool:
    import sympy

    from refcomp.recipes import _immutable

    if isinstance(vt, MadeObjectVar) or not isinstance(vt, (ConstVar, TupleVar)):
        return False
    try:
        value = as_python(vt)
    except TypeError:
        return False
    return _immutable(value) or isinstance(value, sympy.Basic) or type(value) is tuple and \
        all(_immutable(v) or isinstance(v, sympy.Basic) for v in value)


def _name(vt: VT) -> str:
    return vt.source.name() if getattr(vt, "source", None) is not None else \
        f"a {vt.python_type().__name__}"


def _copy_const(tx, vt: ConstVar) -> VT:
    import copy

    value = vt.value
    try:
        state = _state(value, {}, [NODE_LIMIT])
    except _NotPlain as e:
        raise Unsupported(UNSUPPORTED_CALL, f"copy.deepcopy of {_name(vt)}, which holds {e} (only"
                                   " plain Python data is copied while tracing)") from None
    except TypeError as e:
        raise Unsupported(UNSUPPORTED_CALL, f"copy.deepcopy of {_name(vt)}: {e}") from None
    if vt.source is not None:
        _check_not_pending(tx, vt)
        tx.ctx.guard_fact(vt.source, deep_state, "deep_state({})", state)
    return _fresh(tx, copy.deepcopy(value), {})


def _fresh(tx, value, memo: dict) -> VT:
    """The copy as symbolic values the frame owns (Note [Deep copies])."""
    from refcomp.recipes import _immutable
    from refcomp.tracer import objects
    from refcomp.tracer.context import constant_key

    if _immutable(value):
        return ConstVar(value)
    if id(value) in memo:
        return memo[id(value)]
    kind = type(value)
    if kind in (list, tuple):
        out = memo[id(value)] = ListVar([]) if kind is list else TupleVar([])
        out.items = [_fresh(tx, v, memo) for v in value]
        return out
    if kind is dict and all(constant_key(k) for k in value):
        out = memo[id(value)] = DictVar({})
        out.items.update({k: _fresh(tx, v, memo) for k, v in value.items()})
        return out
    if kind in (set, frozenset):
        return ConstVar(value)  # of immutables (deep_state refused others): a constant
    if objects.plain_class(kind):
        source = class_source(kind)
        tx.ctx.guard_fact(source, objects.plain_class, "{} is a plain class", True)
        out = memo[id(value)] = ObjectVar(kind, ConstVar(kind, source))
        out.attrs.update({k: _fresh(tx, v, memo) for k, v in vars(value).items()})
        return out
    # A class with its own dunders: held as the real copy.  The code that reads and
    # writes it is guarded by identity (reads of the class's own state inside those
    # dunders are not: a limit, spec/tracer.md "Deep copies").
    source = class_source(kind)
    for name in ("__getattribute__", "__getattr__", "__setattr__", "__delattr__"):
        if getattr(kind, name, None) is not getattr(object, name, None):
            tx.ctx.wrap(getattr(kind, name), AttrSource(source, name))
    out = memo[id(value)] = MadeObjectVar(value)
    return out


def class_source(cls):
    return ConstSource(cls, cls.__qualname__)


def made_attr(tx, obj: MadeObjectVar, attr, name=None) -> VT:
    """A value read from a copy held as a real object: mutable ones stay that object.
    `name`: an attribute read, which the class may answer (a default, a table): its
    class attribute is guarded, so changing the class recompiles."""
    from refcomp.recipes import _immutable
    from refcomp.tracer import objects

    value = obj.value
    if name is not None and hasattr(value, "__dict__") and name not in vars(value):
        raw = objects._lookup(type(value), name)
        if raw is not None and (_immutable(raw) or type(raw) in (list, tuple, dict)):
            tx.ctx.wrap(getattr(type(value), name), AttrSource(class_source(type(value)),
                                                                name))
    return ConstVar(attr) if _immutable(attr) else MadeObjectVar(attr)


def _write(obj: MadeObjectVar, what: str, fn) -> None:
    try:
        fn()
    except Exception as e:  # eager raises it at the same place: CPython runs it there
        raise Unsupported(UNSUPPORTED_CALL, f"{what} on {obj!r}: {type(e).__name__}: {e}") from None


def set_attr(tx, obj: MadeObjectVar, name: str, value: VT) -> None:
    """`setattr(copy, name, value)`: a constant is written now, by the class's own
    `__setattr__`, to the trace's private copy."""
    from refcomp.recipes import _immutable

    try:
        real = as_python(value)
    except TypeError:
        real = value
    if isinstance(value, MadeObjectVar) or not _immutable(real) or \
            isinstance(real, torch.SymInt) or _symbolic(real):
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                          f"setting {name!r} of {obj!r} to a traced value")
    _write(obj, f"setting {name!r}", lambda: setattr(obj.value, name, real))


def _symbolic(real) -> bool:
    import sympy

    return isinstance(real, sympy.Basic) or type(real) is tuple and any(
        _symbolic(r) for r in real)


def del_attr(tx, obj: MadeObjectVar, name: str) -> None:
    _write(obj, f"deleting {name!r}", lambda: delattr(obj.value, name))
