"""Calls of classes the trace builds values of: namedtuples, frozen dataclasses, model outputs,
torch modules made in the frame, builtin exceptions.

Spec: spec/tracer.md, "Python features".
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import types

import torch

from refcomp.reasons import (
    TRACE_EXCEPTION,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.tracer.context import CONSTANT_TYPES
from refcomp.tracer.facts import is_constant
from refcomp.tracer.values import (
    VT,
    ConstVar,
    MadeObjectVar,
    MethodVar,
    ModelOutputVar,
    TensorVar,
    TupleVar,
    as_python,
)


def is_frozen_dataclass(value) -> bool:
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


def new_frozen_dataclass(tx, cls, args, kwargs) -> ConstVar:
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
        tx.call_function(ConstVar(post_init), [ConstVar(obj)], {})
    return ConstVar(obj)


def new_torch_module(cls, args, kwargs) -> MadeObjectVar:
    """`torch.nn.CrossEntropyLoss()` inside forward (transformers' heads make their loss
    module at every call): a torch.nn module made from constants, with no parameters or
    buffers and no draw from the RNG, is made now, at trace time, and its call traced.
    Eager makes a new one per call, so the trace's object (a MadeObjectVar) cannot leave
    the frame: returning it is RB012, handing it to a replayed effect RB008, and a break
    while it is live refused (refcomp/recipes.py); each of those runs as eager does.  Its
    calls and attribute reads cannot tell it from eager's."""
    what = f"constructing a {cls.__qualname__}"
    if not all(is_constant(v) for v in list(args) + list(kwargs.values())):
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


def new_model_output(tx, cls, args, kwargs) -> ModelOutputVar:
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


def model_output_attr(tx, obj: ModelOutputVar, name: str) -> VT:
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
    if kwargs or not all(is_constant(a) for a in args):
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.value.__name__}() of traced values")
    return ConstVar(cls.value(*[as_python(a) for a in args]))


def new_namedtuple(cls, args, kwargs) -> TupleVar:
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
