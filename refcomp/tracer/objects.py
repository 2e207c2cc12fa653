"""Objects of plain Python classes made by the traced code (transformers' DynamicCache).

Owns: `plain_class` (which classes are made symbolically), `new_object` (`cls(*args,
**kwargs)`: an `ObjectVar` with its `__init__` inlined), attribute reads, writes and
`hasattr` on such an object, and its `bool`/`len` through the class's dunders.  The
object is rebuilt after the graph by refcomp/recipes.py ("object").

Note [Objects made in the frame]: as Dynamo's UserDefinedObjectVariable, an object of a
*plain* class is made symbolically -- its class and a dict of attributes (`ObjectVar`),
`__init__` and methods inlined with it as `self` -- and made after the graph by
`object.__new__(cls)` with its attributes stored.  What "plain" is, the attribute
order and what is guarded: spec/tracer.md, "Objects made in the frame".
"""

from __future__ import annotations

import types

from refcomp.reasons import INEXPRESSIBLE_OP, TRACE_EXCEPTION, UNSUPPORTED_CALL, Raised, Unsupported
from refcomp.tracer.values import VT, ConstVar, ObjectVar, PartialVar

_OWN = ("__setattr__", "__getattribute__", "__delattr__")
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type())


def plain_class(cls) -> bool:
    """Can `cls(...)` be made symbolically (Note [Objects made in the frame])?"""
    if not isinstance(cls, type) or type(cls).__call__ is not type.__call__ or \
            cls.__new__ is not object.__new__ or getattr(cls, "__abstractmethods__", None):
        return False
    if not cls.__dictoffset__:  # instances without a __dict__ (all __slots__)
        return False
    for klass in cls.__mro__[:-1]:
        if not klass.__flags__ & _HEAPTYPE or \
                (klass.__module__ or "").split(".")[0] == "torch" or \
                vars(klass).get("__slots__", ()) or "__del__" in vars(klass):
            return False  # (a builtin base is no heap type; abc.ABC's empty __slots__ is fine)
    if any(getattr(cls, name) is not getattr(object, name) for name in _OWN):
        return False
    return cls.__init__ is object.__init__ or isinstance(cls.__init__, types.FunctionType)


def _plain_fact(cls) -> bool:
    return plain_class(cls)


def new_object(tx, cls_vt: ConstVar, args, kwargs) -> ObjectVar:
    """`cls(*args, **kwargs)` of a plain class: its `__init__` inlined on a new ObjectVar."""

    cls = cls_vt.value
    if cls_vt.source is not None:
        tx.ctx.guard_fact(cls_vt.source, _plain_fact, "{} is a plain class", True)
    obj = ObjectVar(cls, cls_vt)
    if cls.__init__ is object.__init__:
        if args or kwargs:
            raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}() takes no arguments")
        return obj
    result = tx.call_function(tx.load_attr(cls_vt, "__init__"),
                                 [obj] + list(args), kwargs)
    if not (isinstance(result, ConstVar) and result.value is None):
        raise Unsupported(TRACE_EXCEPTION, f"{cls.__name__}.__init__ returned a value")
    return obj


def _lookup(cls, name):
    """The raw class attribute `name` (from the MRO's dicts, as CPython finds it)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _data_descriptor(raw) -> bool:
    kind = type(raw)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def load_attr(tx, obj: ObjectVar, name: str) -> VT:
    """`obj.name` in Python's order: data descriptor, instance dict, class attribute."""

    if name == "__class__":
        return obj.cls_vt
    raw = _lookup(obj.cls, name)
    if raw is not None and _data_descriptor(raw):
        if isinstance(raw, property) and isinstance(raw.fget, types.FunctionType):
            prop = tx.load_attr(obj.cls_vt, name)  # the property, under a guard
            return tx.call_function(tx.load_attr(prop, "fget"), [obj], {})
        raise Unsupported(UNSUPPORTED_CALL, f"attribute {name!r} of {obj!r}: a"
                                   f" {type(raw).__name__} on its class")
    if name in obj.attrs:
        return obj.attrs[name]
    if raw is None:
        if _lookup(obj.cls, "__getattr__") is not None:
            raise Unsupported(UNSUPPORTED_CALL, f"attribute {name!r} of {obj!r}, read through"
                                       " its class's __getattr__")
        raise Raised(AttributeError(f"'{obj.cls.__name__}' object has no attribute"
                                    f" '{name}'"), f"{obj!r} has no attribute {name!r}")
    if isinstance(raw, types.FunctionType):  # a method: bound to the object
        return PartialVar(tx.load_attr(obj.cls_vt, name), [obj], {})
    if isinstance(raw, (staticmethod, classmethod)) or not hasattr(type(raw), "__get__"):
        return tx.load_attr(obj.cls_vt, name)  # read from the class, guarded
    raise Unsupported(UNSUPPORTED_CALL, f"attribute {name!r} of {obj!r}: a {type(raw).__name__}"
                               " on its class")


def store_attr(obj: ObjectVar, name: str, value: VT) -> None:
    raw = _lookup(obj.cls, name)
    if raw is not None and _data_descriptor(raw):
        raise Unsupported(UNSUPPORTED_CALL, f"setting {name!r} of {obj!r}: a {type(raw).__name__}"
                                   " on its class")
    obj.attrs[name] = value


def del_attr(obj: ObjectVar, name: str) -> None:
    """`del obj.name`, `delattr(obj, name)`: from the attributes stored so far."""
    raw = _lookup(obj.cls, name)
    if raw is not None and _data_descriptor(raw):
        raise Unsupported(UNSUPPORTED_CALL, f"deleting {name!r} of {obj!r}: a {type(raw).__name__}"
                                   " on its class")
    if name not in obj.attrs:
        raise Raised(AttributeError(name), f"{obj!r} has no attribute {name!r} to delete")
    del obj.attrs[name]


def has_attr(obj: ObjectVar, name: str) -> bool:
    return name in obj.attrs or _lookup(obj.cls, name) is not None


def call_dunder(tx, obj: ObjectVar, name: str) -> VT:
    """`type(obj).name(obj)` (len, bool): looked up on the class, as CPython does."""

    if not isinstance(_lookup(obj.cls, name), types.FunctionType):
        raise Unsupported(UNSUPPORTED_CALL, f"{name} of {obj!r}")
    return tx.call_function(tx.load_attr(obj.cls_vt, name), [obj], {})


def truth(tx, obj: ObjectVar) -> VT | None:
    """`bool(obj)`: the class's __bool__, else its __len__ (`if cache:`), else None
    (an object is true)."""
    for name in ("__bool__", "__len__"):
        if _lookup(obj.cls, name) is not None:
            return call_dunder(tx, obj, name)
    return None


def is_object_init(value, args, kwargs) -> bool:
    """`object.__init__(obj)` reached by `super().__init__()` from a plain class."""
    return value is object.__init__ and len(args) == 1 and isinstance(args[0], ObjectVar) \
        and not kwargs


SEQUENCE_LIMIT = 1024  # items a traced Sequence iteration may visit before it breaks


def is_python_sequence(cls) -> bool:
    """A `collections.abc.Sequence` iterated by the mixin's `__iter__` over a Python
    `__getitem__` (transformers' `config.per_layer_config` view)."""
    import collections.abc

    return isinstance(cls, type) and issubclass(cls, collections.abc.Sequence) and \
        cls.__iter__ is collections.abc.Sequence.__iter__ and \
        isinstance(_lookup(cls, "__getitem__"), types.FunctionType)


def iterate_sequence(tx, obj: VT) -> list:
    """`for v in seq` as `Sequence.__iter__` runs it: `seq[0]`, `seq[1]`... each
    `__getitem__` inlined, until one raises IndexError."""

    getitem = tx.load_attr(obj, "__getitem__")
    items = []
    for i in range(SEQUENCE_LIMIT):
        try:
            items.append(tx.call_function(getitem, [ConstVar(i)], {}))
        except Raised as raised:
            if isinstance(raised.exc, IndexError):
                return items
            raise
    raise Unsupported(INEXPRESSIBLE_OP, f"iteration over {obj!r}: more than {SEQUENCE_LIMIT} items")
