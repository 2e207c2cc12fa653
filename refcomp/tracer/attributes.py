"""Reading names and attributes: globals, attributes of traced values, class attributes.

Owns: `load_global`, `load_attr` (each read guarded where it was read), `class_attr`,
`has_attr` and `super()`.  A property or
`__getattr__` is user code: it is called through the translator.  Spec:
spec/tracer.md, "Python features"; spec/guards.md.
"""

from __future__ import annotations

import builtins
import contextvars
import inspect
import math
import operator
import types

import sympy
import torch

from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    TRACE_EXCEPTION,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    Raised,
    Unsupported,
)
from refcomp.sources import (
    ATTR,
    AttrSource,
    BuiltinSource,
    ConstSource,
    DerivedSource,
    GlobalSource,
    ItemSource,
)
from refcomp.tracer import (
    classes,
    copies,
    effects,
    objects,
    tensor_layout,
)
from refcomp.tracer.constructors import model_output_attr
from refcomp.tracer.context import CONSTANT_TYPES, module_attr_source
from refcomp.tracer.facts import class_lookup, describe_vt, is_torch_function, is_user_code
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    ListVar,
    MadeObjectVar,
    MethodVar,
    ModelOutputVar,
    ObjectVar,
    OpaqueVar,
    PartialVar,
    SuperVar,
    TensorVar,
    TupleVar,
    as_python,
)

# Modules whose attributes are trusted not to change: reading torch.relu installs no
# guard.  See spec/guards.md, "Deliberately not guarded".
TRUSTED_MODULES = (torch, torch.nn.functional, torch.nn, math, operator, builtins)


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
            # Note [Reading what the frame writes] (spec/runtime.md).
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


# Methods of a set that only read it (anything else may change it: a break).
_READING_METHODS = frozenset({
    "copy", "difference", "intersection", "isdisjoint", "issubset", "issuperset",
    "symmetric_difference", "union", "__contains__", "__len__", "__iter__", "__eq__",
    "__ne__", "__or__", "__and__", "__sub__", "__xor__", "__le__", "__lt__", "__ge__",
    "__gt__", "count", "decode", "endswith", "find", "hex", "index", "startswith"})


def load_attr(tx, obj: VT, name: str) -> VT:
    if isinstance(obj, SuperVar):
        return super_attr(tx, obj, name)
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
        # (read statically: a property or __getattr__ runs only where the code reads it,
        # Note [Reads that run user code])
        stored = static_attr(obj.value, name)
        if obj.source is not None and name in effects.counted_attrs(tx.code) and \
                isinstance(stored, CONSTANT_TYPES) and not is_flag(stored):
            # Note [Reading what the frame writes] (spec/runtime.md).
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                              f"attribute {name!r} is assigned in this frame;"
                                       " it is read and updated outside the graph")
        if obj.source is not None and not effects.is_tensor_module_attr(obj.value, name) \
                and tx.current is not None and tx.current.opname == "LOAD_ATTR" and \
                type(stored) in (list, dict) and \
                effects.mutated_by_pattern(tx.instructions, tx.ip - 1):
            src = module_attr_source(obj.value, obj.source, name) if isinstance(
                obj.value, torch.nn.Module) else AttrSource(obj.source, name, ATTR)
            return effects.opaque_container(tx.ctx, getattr(obj.value, name), src)
    if isinstance(obj, classes.ClassVar):
        return classes.class_attr(tx, obj, name)
    if isinstance(obj, classes.FunctionCtxVar):
        return classes.ctx_attr(obj, name)
    if isinstance(obj, ModelOutputVar):
        return model_output_attr(tx, obj, name)
    if isinstance(obj, ObjectVar):  # Note [Objects made in the frame]
        return objects.load_attr(tx, obj, name)
    if isinstance(obj, TupleVar) and obj.field(name) is not None:
        return obj.field(name)  # r.values of torch.return_types.max
    if isinstance(obj, (TupleVar, ListVar, DictVar)):
        return MethodVar(name, obj, name)
    if not isinstance(obj, ConstVar):
        raise Unsupported(INEXPRESSIBLE_OP, f"attribute {name!r} of {obj!r}")
    if isinstance(obj.value, sympy.Basic) and obj.value.free_symbols:
        # `n.__str__()`, `n.__eq__(4)` of a dynamic size n: the int's method, on its traced
        # value, guarded (Note [Sizes inside folded values]); the sympy object's is no int's
        obj = ConstVar(tx.ctx.specialize(obj.value))
    value = obj.value
    if isinstance(value, types.ModuleType) and value in TRUSTED_MODULES:
        return tx.ctx.wrap(_getattr(value, name), None)
    if isinstance(value, torch.nn.Module) and _user_property(type(value), name):
        return _python_read(tx, obj, name)
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
    read = _python_read(tx, obj, name)
    if read is not None:
        return read
    attr = _getattr(value, name)
    # A method bound at this access (`opt.zero_grad`: torch's own methods too) is a new
    # object every time: the function is what is guarded (an identity guard on the bound
    # method failed right after tracing, so a training step re-traced on every call).
    if isinstance(attr, types.MethodType) and isinstance(attr.__func__, types.FunctionType) \
            and (not is_torch_function(attr.__func__) or attr.__self__ is value):
        if attr.__self__ is value and hasattr(value, "__dict__"):
            tx.ctx.guard_not_overridden(obj.source, name)
        return MethodVar(attr.__func__, obj, name)
    if type(value) in (set, bytearray) and callable(attr) and name not in _READING_METHODS:
        # The value traced is a copy (a guarded set's expected contents) or a set made in
        # the frame that a break re-makes: a method bound to it would change that object,
        # not the user's.  The break loads the method from the real object.
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"{type(value).__name__}.{name} may"
                                                    " change the object")
    if isinstance(attr, (types.BuiltinMethodType, types.MethodWrapperType)) and \
            attr.__self__ is value:
        # `s.startswith`: a new bound object at every access (an identity guard on it
        # could never pass); what it does is fixed by `value`, guarded where it was read.
        return tx.ctx.wrap(attr, None)
    if type(obj) is MadeObjectVar and not isinstance(value, torch.nn.Module):
        return copies.made_attr(tx, obj, attr, name)  # Note [Deep copies]
    source = AttrSource(obj.source, name, ATTR) if obj.source is not None else None
    return tx.ctx.wrap(attr, source)


# Note [Reads that run user code]: `obj.name` runs Python code of obj's class when name is a
# property, a descriptor whose __get__ is a Python function, or missing and the class has
# a Python __getattr__, and on every read when the class has a Python __getattribute__
# (transformers' PretrainedConfig maps attribute aliases in one).  Reading it for real
# while tracing and then guarding its value ran that code once more per guard check (a
# counter in a property advanced 4 times a call where eager advances it once).  Such a
# read is traced instead, as the call it is: `type(obj).__getattribute__(obj, name)`,
# `type(obj).prop.fget(obj)`, `type(raw).__get__(raw, obj, type(obj))`,
# `type(obj).__getattr__(obj, name)`.  What that code reads through object's own lookup
# (`super().__getattribute__(key)`, `object.__getattribute__(obj, key)`: the instance
# dict, a class attribute, a C descriptor) is guarded through a source that performs that
# same lookup, `object.__getattribute__(o, key)`, so no guard runs user code; what the
# code does (a side effect, a break) is what it does in eager.  The same holds for
# `hasattr` (the read, False where it raises AttributeError; its guard never calls
# __getattr__) and for stores that run the class's code (`traced_store`).  Left alone: tracing the
# first call asks an object with a Python __getattribute__ for its `__class__` (every
# isinstance check of a value whose type is not the class asks).
def _python_read(tx, obj: ConstVar, name: str):
    """`obj.name` traced as the call CPython makes, or None when the read only looks in
    dicts (instance, class) and C descriptors."""
    value = obj.value
    cls = type(value)
    if isinstance(value, type) or cls.__module__ == "builtins" or name.startswith("__") \
            or type(obj) is MadeObjectVar:  # the trace's own copy: read as before (Note
        return None                          # [Deep copies])
    if is_user_code(cls.__getattribute__):
        method = tx.load_attr(_class_vt(tx, obj), "__getattribute__")
        return _or_getattr(tx, obj, name, lambda: tx.call_function(method, [obj, ConstVar(name)],
                                                                   {}))
    return _traced_lookup(tx, obj, name)


def _or_getattr(tx, obj: ConstVar, name: str, read):
    """`read()`, the traced __getattribute__ part of `obj.name`; where it raises
    AttributeError and the class has a Python __getattr__, CPython then calls that."""
    try:
        return read()
    except Raised as raised:
        getattr_fn = class_lookup(type(obj.value), "__getattr__")
        if not isinstance(raised.exc, AttributeError) or not is_user_code(getattr_fn) or \
                isinstance(obj.value, torch.nn.Module):
            raise
    return tx.call_function(tx.load_attr(_class_vt(tx, obj), "__getattr__"),
                            [obj, ConstVar(name)], {})


def _traced_lookup(tx, obj: ConstVar, name: str):
    """The part of object's attribute lookup that runs Python code (a property, a Python
    descriptor, __getattr__), traced; None when the lookup runs none."""
    value = obj.value
    cls = type(value)
    raw = class_lookup(cls, name)
    in_instance = name in _instance_dict(value)
    if raw is not None and (not in_instance or _is_data_descriptor(raw)):
        getter = type(raw).__dict__.get("__get__") if not isinstance(raw, property) else None
        if isinstance(raw, property) and (is_user_code(raw.fget) or _parametrized(raw.fget)):
            prop = tx.load_attr(_class_vt(tx, obj), name)  # the property, guarded
            fget = tx.load_attr(prop, "fget")
            return _or_getattr(tx, obj, name, lambda: tx.call_function(fget, [obj], {}))
        if is_user_code(getter):
            cls_vt = _class_vt(tx, obj)
            raw_vt = _class_entry(tx, cls_vt, name, raw)
            return _or_getattr(tx, obj, name, lambda: tx.call_function(
                ConstVar(getter), [raw_vt, obj, cls_vt], {}))
        return None
    if raw is None and not in_instance:
        getattr_fn = class_lookup(cls, "__getattr__")
        if is_user_code(getattr_fn) and not isinstance(value, torch.nn.Module):
            tx.ctx.guard_not_overridden(obj.source, name)  # still missing from the instance
            return tx.call_function(tx.load_attr(_class_vt(tx, obj), "__getattr__"),
                                    [obj, ConstVar(name)], {})
    return None


def traced_store(tx, obj: VT, name: str, value: VT) -> bool:
    """`obj.name = value` where the store runs Python code of obj's class -- a Python
    __setattr__, a property's setter, a data descriptor's Python __set__ -- traced as the
    call CPython makes (what that code stores is then stored, or breaks, as any store);
    False where the store only writes the instance dict (Note [Reads that run user code])."""
    if not isinstance(obj, ConstVar) or obj.source is None or \
            isinstance(obj.value, (type, torch.nn.Module)) or type(obj) is MadeObjectVar:
        return False
    cls = type(obj.value)
    if is_user_code(class_lookup(cls, "__setattr__")):
        method = tx.load_attr(_class_vt(tx, obj), "__setattr__")
        tx.call_function(method, [obj, ConstVar(name), value], {})
        return True
    raw = class_lookup(cls, name)
    if isinstance(raw, property) and is_user_code(raw.fset):
        prop = tx.load_attr(_class_vt(tx, obj), name)  # the property, guarded
        tx.call_function(tx.load_attr(prop, "fset"), [obj, value], {})
        return True
    setter = class_lookup(type(raw), "__set__") if raw is not None else None
    if is_user_code(setter):
        cls_vt = _class_vt(tx, obj)
        tx.call_function(ConstVar(setter), [_class_entry(tx, cls_vt, name, raw), obj, value], {})
        return True
    return False


def default_setattr(tx, obj: VT, name: VT, value: VT) -> VT:
    """`object.__setattr__(obj, name, value)` (`super().__setattr__(key, value)` inside a
    class's own __setattr__): object's plain store into the instance dict, replayed after
    the graph by that same call and read back by this trace (Note [Replayed side
    effects]); a data descriptor of that name (object's store would run it) breaks."""
    key = as_python(name)
    if not isinstance(obj, ConstVar) or obj.source is None or not isinstance(key, str) or \
            isinstance(obj.value, (type, torch.nn.Module)) or type(obj) is MadeObjectVar:
        raise Unsupported(UNSUPPORTED_CALL, f"object.__setattr__ of {describe_vt(obj)}")
    raw = class_lookup(type(obj.value), key)
    if raw is not None and _is_data_descriptor(raw):
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT,
                          f"object.__setattr__ of {key!r}, a {type(raw).__name__} on the class")
    effects.record(tx, "object_setattr", obj, key, [value],
                   what=f"object.__setattr__({obj.source.name()}, {key!r}, ...)")
    tx.ctx.attr_writes[(id(obj.value), key)] = value
    return ConstVar(None)


def default_getattr(tx, obj: VT, name: VT) -> VT:
    """`object.__getattribute__(obj, name)` (`super().__getattribute__(name)` inside a
    class's own __getattribute__): object's lookup, its Python parts traced and the rest
    guarded through that same lookup (Note [Reads that run user code])."""
    key = as_python(name)
    if not isinstance(obj, ConstVar) or not isinstance(key, str):
        raise Unsupported(UNSUPPORTED_CALL, f"object.__getattribute__ of {describe_vt(obj)}")
    traced = _traced_lookup(tx, obj, key)
    if traced is not None:
        return traced
    try:
        found = object.__getattribute__(obj.value, key)
    except AttributeError as e:
        raise Raised(e, f"{describe_vt(obj)} has no attribute {key!r}", TRACE_EXCEPTION) \
            from None
    raw = class_lookup(type(obj.value), key)
    if isinstance(raw, types.FunctionType) and key not in _instance_dict(obj.value):
        return MethodVar(raw, obj, key)  # a method, bound to obj
    if obj.source is None and type(obj) is MadeObjectVar:
        return copies.made_attr(tx, obj, found, key)  # Note [Deep copies]: class guarded
    source = None if obj.source is None else \
        DerivedSource(obj.source, _ObjectLookup(key), f"object.__getattribute__({{}}, {key!r})")
    return tx.ctx.wrap(found, source)


def _instance_dict(value) -> dict:
    try:
        held = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return {}
    return held if isinstance(held, dict) else {}


class _ObjectLookup:
    """A guard's way to `obj.name` through object's own lookup, never the class's
    __getattribute__ (Note [Reads that run user code])."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, obj):
        return object.__getattribute__(obj, self.name)


def static_attr(value, name: str, default=None):
    """What `value.name` holds, found without running any descriptor or __getattr__ (an
    nn.Module's parameters, buffers and submodules included), else `default`."""
    if isinstance(value, torch.nn.Module):
        for where in ("_parameters", "_buffers", "_modules"):
            held = value.__dict__.get(where, {})
            if name in held:
                return held[name]
    found = inspect.getattr_static(value, name, default)
    return default if isinstance(found, (property, types.MemberDescriptorType)) or \
        type(found).__dict__.get("__get__") is not None and \
        not isinstance(found, (types.FunctionType, staticmethod, classmethod)) else found


def _user_property(cls, name: str) -> bool:
    """A property of a user's module class (not torch's own): traced, not read for real."""
    raw = class_lookup(cls, name)
    return isinstance(raw, property) and (is_user_code(raw.fget) or _parametrized(raw.fget))


def _parametrized(fget) -> bool:
    """A parametrized tensor (torch.nn.utils.parametrize): its parametrizations run
    where the module reads it, traced, once per read as in eager (spec/autograd.md)."""
    return getattr(fget, "__module__", None) == "torch.nn.utils.parametrize"


def _is_data_descriptor(raw) -> bool:
    kind = type(raw)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


class _StaticLookup:
    """A guard's way to the raw class attribute `name`: read from the MRO's dicts, so the
    guard never calls the descriptor it checks."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, cls):
        return class_lookup(cls, self.name)


def _class_entry(tx, cls_vt: VT, name: str, raw) -> VT:
    """`raw`, the descriptor found as `name` in the MRO of the class `cls_vt`, guarded
    through a static lookup (the guard never calls it)."""
    source = None if cls_vt.source is None else \
        DerivedSource(cls_vt.source, _StaticLookup(name), f"{{}}.__dict__[{name!r}]")
    return tx.ctx.wrap(raw, source)


def _class_vt(tx, obj: ConstVar):
    """type(obj), guarded by identity where obj has a source (read with `type`, which
    runs no user code)."""
    if obj.source is None:
        return ConstVar(type(obj.value))
    return tx.ctx.wrap(type(obj.value), DerivedSource(obj.source, type, "type({})"))


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


# --- super() -------------------------------------------------------------------------------
def new_super(tx, args, kwargs) -> SuperVar:
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
        raise Unsupported(UNSUPPORTED_CALL, f"super() bound to {describe_vt(obj)}")
    return SuperVar(cls.value, obj)


def super_attr(tx, sup: SuperVar, name: str) -> VT:
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


def has_attr(tx, obj: VT, name: str) -> bool:
    """hasattr(obj, name); on a sourced object the answer is guarded."""
    if isinstance(obj, TensorVar):
        if hasattr(torch.Tensor, name) or obj.source is None:
            return hasattr(obj.meta, name)
        # An attribute the user set on a tensor the frame reads (`t.my_scale = 5.0`): in
        # the real tensor's __dict__, and its absence guarded like any hasattr.
        real = tx.ctx.examples.get(obj.source.name())
        result = real is not None and hasattr(real, name)
        tx.ctx.guard_fact(obj.source, lambda o, n=name: hasattr(o, n),
                          f"hasattr({{}}, {name!r})", result)
        return result
    if isinstance(obj, ObjectVar):
        return objects.has_attr(obj, name)
    if not isinstance(obj, ConstVar):
        return hasattr(obj.python_type(), name)
    if (id(obj.value), name) in tx.ctx.attr_writes:
        return True  # Note [Replayed side effects]: this trace stored it
    try:  # Note [Reads that run user code]: hasattr is the read, and False on AttributeError
        if _python_read(tx, obj, name) is not None:
            return True
    except Raised as raised:
        if isinstance(raised.exc, AttributeError):
            return False
        raise
    result = hasattr(obj.value, name)
    if not isinstance(obj.value, CONSTANT_TYPES) and not (
            isinstance(obj.value, types.ModuleType) and obj.value in TRUSTED_MODULES):
        has = _StaticHas(name) if is_user_code(class_lookup(type(obj.value), "__getattr__")) \
            else (lambda o, n=name: hasattr(o, n))
        tx.ctx.guard_fact(obj.source, has, f"hasattr({{}}, {name!r})", result)
    return result


class _StaticHas:
    """A guard's `hasattr(o, name)` on an object whose class has a Python __getattr__:
    found in the instance dict or on the class, so the guard never calls __getattr__."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, obj):
        return self.name in _instance_dict(obj) or class_lookup(type(obj), self.name) is not None
