"""Subscripts, membership, iteration and the methods of lists, tuples, dicts and sets.

Owns: `getitem`/`setitem`/`delitem`, `contains`, `iterate` (the items a `for` loop
visits: loops are unrolled) and `container_method`.  Spec: spec/tracer.md, "Python features".
"""

from __future__ import annotations

import collections.abc

import torch

from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    TENSOR_CONTROL_FLOW,
    TRACE_EXCEPTION,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    Raised,
    Unsupported,
)
from refcomp.sources import (
    MODULE,
    AttrSource,
    DerivedSource,
    ItemSource,
    ModuleSliceSource,
)
from refcomp.tracer import (
    copies,
    effects,
    objects,
    tensor_layout,
)
from refcomp.tracer.constructors import model_output_key, own_to_tuple
from refcomp.tracer.context import CONSTANT_TYPES, constant_key
from refcomp.tracer.facts import (
    class_lookup,
    concrete_vt,
    describe_vt,
    is_constant,
    is_user_code,
    require_const,
    size_or_tuple,
)
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictIteratorVar,
    DictVar,
    DictViewVar,
    GeneratorVar,
    IteratorVar,
    ListIteratorVar,
    ListVar,
    MadeObjectVar,
    ModelOutputVar,
    ObjectVar,
    OpaqueVar,
    TensorVar,
    TupleVar,
    as_python,
)


# --- subscripts -----------------------------------------------------------------------------
def getitem(tx, obj: VT, index: VT) -> VT:
    if isinstance(obj, DictViewVar):  # eager raises TypeError: run it there (a break)
        raise Unsupported(INEXPRESSIBLE_OP, f"a subscript of {obj.python_type().__name__}")
    if isinstance(obj, TensorVar):
        return tensor_layout.tensor_getitem(tx.ctx, obj, index)
    if isinstance(index, TensorVar) and isinstance(obj, ConstVar) and \
            isinstance(obj.value, dict) and obj.source is not None:
        from refcomp.tracer.foreach import tensor_keyed_item

        return tensor_keyed_item(tx, obj, index)  # an optimizer's `state[p]`
    # a dynamic size as an index or slice bound: its traced value, guarded (Note [Sizes
    # inside folded values]; a sympy symbol is no index)
    key = as_python(concrete_vt(tx.ctx, require_const(tx, index, "subscript")))
    if isinstance(obj, (TupleVar, ListVar)):
        if isinstance(key, slice):  # a slice of a torch.Size is a torch.Size
            return TupleVar(obj.items[key], cls=size_or_tuple(obj)) \
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
        if type(obj) is not MadeObjectVar and \
                is_user_code(class_lookup(type(value), "__getitem__")):
            # A Python __getitem__ is user code: traced as the call it is, so it runs as
            # often as in eager and no guard calls it (Note [Reads that run user code]).
            cls = ConstVar(type(value)) if obj.source is None else \
                tx.ctx.wrap(type(value), DerivedSource(obj.source, type, "type({})"))
            return tx.call_function(tx.load_attr(cls, "__getitem__"), [obj, index], {})
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
    if isinstance(obj, OpaqueVar) and obj.kind is dict and is_constant(index) and \
            not any(e[1] is obj and (e[0] != "setitem" or is_constant(e[3][0]) and
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


def contains(tx, container: VT, item: VT) -> bool:
    if isinstance(container, ModelOutputVar):
        key = as_python(require_const(tx, item, "key"))
        return model_output_key(container.cls, key) in container.items
    # Python's equality on dynamic sizes: their traced values, guarded
    # (Note [Sizes inside folded values])
    if isinstance(container, DictVar):
        return as_python(concrete_vt(tx.ctx, require_const(tx, item, "key"))) in container.items
    if isinstance(container, (TupleVar, ListVar)):
        if isinstance(item, TensorVar):
            raise Unsupported(TENSOR_CONTROL_FLOW, "`tensor in sequence` compares tensor values")
        return as_python(concrete_vt(tx.ctx, item)) in [
            as_python(concrete_vt(tx.ctx, i)) for i in container.items
            if not isinstance(i, TensorVar)]
    if isinstance(container, ConstVar) and isinstance(item, ConstVar):
        item = concrete_vt(tx.ctx, item)
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


def iterator_of(tx, obj: VT) -> VT:
    """GET_ITER: a list or dict the trace holds gets a live iterator (CPython's semantics
    when the loop body grows the list, or changes the dict's size); anything else an
    iterator over the items `iterate` lists."""
    if isinstance(obj, (IteratorVar, GeneratorVar)):
        return obj
    if isinstance(obj, DictViewVar):
        return DictIteratorVar(obj.seq, obj.kind)
    if isinstance(obj, ListVar):
        return ListIteratorVar(obj)
    if isinstance(obj, DictVar):
        return DictIteratorVar(obj)
    return IteratorVar(iterate(tx, obj))


def iterate(tx, obj: VT) -> list:
    """The items a `for` loop over `obj` visits (loops are unrolled)."""
    if isinstance(obj, (TupleVar, ListVar)):
        return list(obj.items)
    if isinstance(obj, DictVar):
        return [ConstVar(k) for k in obj.items]
    if isinstance(obj, (IteratorVar, GeneratorVar)):
        return obj.rest()  # consumed, as `list(it)` consumes it
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


# Methods of a set that read it and return a new value (a set the trace holds is a
# constant: made by the trace, or guarded by value where it was read).
SET_QUERIES = frozenset({"issubset", "issuperset", "isdisjoint", "union", "intersection",
                          "difference", "symmetric_difference", "copy", "__contains__"})


def dict_get(tx, args, kwargs):
    """`dict.get(d, key[, default])`, reached through `super().get` of a dict subclass
    (transformers' `_CanRecordRegistry`): the item read is guarded like any other."""
    if kwargs or len(args) not in (2, 3):
        raise Unsupported(TRACE_EXCEPTION, "dict.get() takes a dict, a key and a default")
    d, key, default = args[0], args[1], args[2] if len(args) == 3 else ConstVar(None)
    key = as_python(require_const(tx, key, "key"))
    if isinstance(d, DictVar):
        return d.items.get(key, default)
    if not (isinstance(d, ConstVar) and isinstance(d.value, dict) and constant_key(key)):
        raise Unsupported(UNSUPPORTED_CALL, f"dict.get of {describe_vt(d)}")
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


def container_method(tx, obj, name, args, kwargs) -> VT:
    if isinstance(obj, ModelOutputVar):
        if name == "to_tuple" and own_to_tuple(obj.cls) is not None:
            return tx.call_function(ConstVar(own_to_tuple(obj.cls)), [obj] + list(args),
                                 kwargs)
        if name == "to_tuple" and not args and not kwargs:
            return TupleVar(list(obj.items.values()))
        if name not in ("keys", "values", "items", "get"):  # pop/update... raise in eager
            raise Unsupported(UNSUPPORTED_CALL, f"{obj.cls.__name__}.{name}")
        if name == "get" and args and not kwargs:
            key = model_output_key(obj.cls, as_python(require_const(tx, args[0], "key")))
            return obj.items.get(key, args[1] if len(args) > 1 else ConstVar(None))
    if isinstance(obj, DictVar):
        if name in ("items", "keys", "values") and not args and not kwargs:
            return DictViewVar(obj, name)
        if name == "get":
            key = as_python(concrete_vt(tx.ctx, args[0]))
            default = args[1] if len(args) > 1 else ConstVar(None)
            return obj.items.get(key, default)
    if isinstance(obj, ListVar) and name == "copy" and not args and not kwargs:
        return ListVar(list(obj.items))  # a new list of the same items (swin_t)
    if isinstance(obj, DictVar) and name == "copy" and not args and not kwargs:
        return DictVar(dict(obj.items))
    if isinstance(obj, (ListVar, TupleVar)) and name in ("index", "count"):
        # Python's equality on dynamic sizes: their traced values, guarded
        # (Note [Sizes inside folded values]); only these two compare the items
        items = [as_python(concrete_vt(tx.ctx, i)) for i in obj.items]
        if name == "index" and not kwargs:
            return ConstVar(items.index(as_python(concrete_vt(tx.ctx, args[0]))))
        if name == "count" and not kwargs:
            return ConstVar(items.count(as_python(concrete_vt(tx.ctx, args[0]))))
    if isinstance(obj, ListVar) and not isinstance(obj, DictViewVar) and \
            name in ("append", "extend", "insert", "pop", "clear", "reverse") and not kwargs:
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
            all(is_constant(a) for a in args[:1]) and not (name == "update" and kwargs):
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
