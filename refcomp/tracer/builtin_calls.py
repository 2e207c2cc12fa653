"""Builtins and library functions the trace answers itself.

Owns: the pure builtins folded on constants, the handlers of builtins that see
symbolic values (`len`, `zip`, `isinstance`, `max`...), status queries
(`torch.is_grad_enabled()`) and no-op calls.  Spec: spec/tracer.md, "Python features".
"""

from __future__ import annotations

import builtins
import copy
import functools
import inspect
import itertools
import math
import operator
import types

import sympy
import torch

from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    TENSOR_CONTROL_FLOW,
    TENSOR_TO_PYTHON,
    TRACE_EXCEPTION,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.sources import (
    AttrSource,
    ConstSource,
)
from refcomp.tracer import (
    classes,
    copies,
    dynamic_floats,
    objects,
    rng,
    torch_table,
)
from refcomp.tracer.attributes import has_attr, load_attr
from refcomp.tracer.containers import dict_get, getitem, iterate, iterator_of
from refcomp.tracer.context import CONSTANT_TYPES
from refcomp.tracer.facts import concrete_vt, describe_vt, is_constant, require_const
from refcomp.tracer.inlining import wrap_defaults, wrap_kwdefaults
from refcomp.tracer.operators import binary, fold, is_symbolic_value, truth
from refcomp.tracer.values import (
    ConstVar,
    DictVar,
    EnumerateVar,
    FunctionVar,
    GeneratorVar,
    GradModeVar,
    IteratorVar,
    ListVar,
    MadeObjectVar,
    MethodVar,
    ObjectVar,
    PartialVar,
    TensorVar,
    TupleVar,
    as_python,
)

# Builtins evaluated directly when every argument is a constant (pure, no side effects).
PURE_BUILTINS = {abs, all, any, bool, divmod, float, int, isinstance, issubclass, len, max,
                 min, pow, repr, round, sorted, str, sum, tuple, list, hash, chr, ord,
                 reversed, range, slice, type, callable, hasattr}
PURE_FUNCTIONS = {v for m in (math, operator) for v in vars(m).values() if callable(v)} | {
    torch.finfo, torch.iinfo}  # of a dtype: fixed facts (`torch.finfo(x.dtype).min`)


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


def is_status_query(value) -> bool:
    return isinstance(value, types.FunctionType) and \
        (value.__module__, value.__qualname__) in STATUS_QUERIES


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
NO_OP_CALLS = {
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
    # Named once per process (torch.utils.rename_privateuse1_backend refuses a second
    # name); torch.utils._foreach_utils asks it for the devices with foreach kernels.
    torch._C._get_privateuse1_backend_name: lambda args: torch._C._get_privateuse1_backend_name(),
}


def grad_mode_call(tx, value, args, kwargs):
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
        n = fold(len, obj.value)
        tx.ctx.guard_fact(obj.source, len, "len({})", n.value)
        return n
    return fold(len, as_python(obj))


def _range_like(fn):
    def handler(tx, args, kwargs):
        # range(n) of a dynamic size n: its traced value, guarded (Note [Sizes inside
        # folded values]); a sympy symbol is no index
        return ConstVar(fn(*[as_python(concrete_vt(tx.ctx, require_const(tx, a, "range bound")))
                             for a in args]))
    return handler


def _enumerate(tx, args, kwargs):
    start = as_python(args[1]) if len(args) > 1 else as_python(kwargs.get("start",
                                                                          ConstVar(0)))
    return EnumerateVar(iterator_of(tx, args[0]), start)


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
    if isinstance(value, TensorVar) or not (is_symbolic_value(value) or isinstance(
            as_python(value), bool)):
        raise Unsupported(TRACE_EXCEPTION, f"expect_true of {value!r}: eager raises AssertionError")
    return ConstVar(truth(tx, value))


def _filter(tx, args, kwargs):
    """filter(fn, it), evaluated when made; a `fn` that records a side effect is refused
    (eager's filter is lazy, so the effects' order could differ)."""
    fn, items = args[0], iterate(tx, args[1])
    before = len(tx.ctx.effects)
    kept = [i for i in items if truth(tx, i if isinstance(fn, ConstVar) and fn.value is None
                                      else tx.call_function(fn, [i], {}))]
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
    items = [tx.call_function(fn, list(row), {}) for row in zip(*columns)]
    if len(tx.ctx.effects) != before:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "map() with a function that has side effects")
    return IteratorVar(items)


def _type(tx, args, kwargs):
    """type(obj): a tensor made by the trace is a torch.Tensor; a graph input's exact type
    (Tensor or Parameter) is pinned by its TENSOR_MATCH guard."""
    if len(args) != 1 or kwargs:  # type(name, bases, namespace) of constants: folded
        if not all(is_constant(v) for v in list(args) + list(kwargs.values())):
            raise Unsupported(UNSUPPORTED_CALL, "type() making a class of traced values")
        return fold(type, *[as_python(a) for a in args],
                     **{k: as_python(v) for k, v in kwargs.items()})
    (obj,) = args
    if isinstance(obj, TensorVar):
        return ConstVar(_tensor_type(tx, obj))
    if isinstance(obj, ConstVar) and not dynamic_floats.is_dynamic(obj):
        return ConstVar(type(obj.value))
    try:
        return ConstVar(obj.python_type())
    except NotImplementedError:
        raise Unsupported(UNSUPPORTED_CALL, f"type() of {obj!r}") from None


def _tensor_type(tx, obj):
    """A traced tensor's Python type: a graph input's exact type (Tensor or Parameter, pinned
    by its TENSOR_MATCH guard), else torch.Tensor (what the trace's ops return)."""
    example = tx.ctx.examples.get(obj.source.name()) if obj.source is not None else None
    return type(example) if example is not None else torch.Tensor


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
        acc = tx.call_function(args[0], [acc, item], {})
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
        out.append(tx.call_function(fn, [out[-1], item], {}))
    return IteratorVar(out)


def _broadcast_shapes(tx, args, kwargs):
    """torch.broadcast_shapes of constant shapes: computed now (its Python reads
    torch.fx's nested-int helpers, on the inline skip list)."""
    shapes = [as_python(a) for a in args] if not kwargs and all(
        is_constant(a) for a in args) else None
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
    if isinstance(obj, TensorVar):  # its type as type() gives it: a Parameter is one
        kind = _tensor_type(tx, obj)
        return ConstVar(issubclass(kind, cls) if isinstance(cls, type) else any(
            issubclass(kind, c) for c in cls))
    if isinstance(obj, ConstVar) and not dynamic_floats.is_dynamic(obj):
        return ConstVar(isinstance(obj.value, cls))
    return ConstVar(issubclass(obj.python_type(), cls) if isinstance(cls, type) else any(
        issubclass(obj.python_type(), c) for c in cls))


def _getattr_builtin(tx, args, kwargs):
    name = as_python(args[1])
    if len(args) > 2 and not has_attr(tx, args[0], name):
        return args[2]  # the absence is guarded: setting the attribute later recompiles
    return load_attr(tx, args[0], name)


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
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"setattr on {describe_vt(obj)}")
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
                          f"deleting attribute {name!r} of {describe_vt(obj)}")
    return ConstVar(None)


def _hasattr(tx, args, kwargs):
    return ConstVar(has_attr(tx, args[0], as_python(args[1])))


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
            return fold(fn, [as_python(i) for i in items])
        keyed = (lambda item: item) if key is None else \
            (lambda item: tx.call_function(key, [item], {}))
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
        return fold(fn, *values)
    return handler


def _abs(tx, args, kwargs):
    if isinstance(args[0], TensorVar):
        return torch_table.call_torch(tx.ctx, torch.abs, args, {})
    return fold(abs, as_python(args[0]))


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
            raise Unsupported(UNSUPPORTED_CALL, f"callable() of {describe_vt(obj)}") from None
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
        if not all(is_constant(d) for d in list(obj.defaults) + list(obj.kwdefaults.values())):
            raise Unsupported(UNSUPPORTED_CALL,
                              "inspect.signature() of a function whose defaults are"
                                       " traced values")
        fn = types.FunctionType(obj.code, {}, obj.name,
                                tuple(as_python(d) for d in obj.defaults),
                                tuple(types.CellType() for _ in obj.code.co_freevars))
        fn.__kwdefaults__ = {k: as_python(v) for k, v in obj.kwdefaults.items()} or None
        return ConstVar(inspect.signature(fn))
    else:
        raise Unsupported(UNSUPPORTED_CALL, f"inspect.signature() of {describe_vt(obj)}")
    if any(hasattr(fn, a) for a in ("__signature__", "__wrapped__", "__text_signature__")):
        raise Unsupported(UNSUPPORTED_CALL, f"inspect.signature() of {fn.__qualname__}, which"
                                   " overrides its signature")
    tx.ctx.wrap(fn.__code__, AttrSource(src, "__code__"))  # ID_MATCH, as for a call
    wrap_defaults(tx, fn, src)
    wrap_kwdefaults(tx, fn, src)
    sig = inspect.signature(fn)
    if bound:  # a bound method's signature leaves out the argument it is bound to
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return ConstVar(sig)

BUILTIN_HANDLERS = {
    len: _len, range: _range_like(range), enumerate: _enumerate, zip: _zip, list: _list,
    tuple: _tuple, reversed: _reversed, isinstance: _isinstance, getattr: _getattr_builtin,
    hasattr: _hasattr, setattr: _setattr_builtin, delattr: _delattr_builtin,
    copy.deepcopy: copies.deepcopy, callable: _callable, inspect.signature: _signature,
    min: _minmax(min, "<"), max: _minmax(max, ">"), sum: _sum,
    int: _to_python_number(int), float: _to_python_number(float),
    bool: _to_python_number(bool), abs: _abs, all: _all_any(False), any: _all_any(True),
    dict.get: dict_get, itertools.repeat: _repeat, filter: _filter, map: _map, type: _type,
    functools.reduce: _reduce, itertools.accumulate: _accumulate,
    torch.broadcast_shapes: _broadcast_shapes, next: _next,
    builtins.__build_class__: classes.build_class,
    staticmethod: classes.staticmethod_call,
    torch.Tensor.__getitem__: _tensor_getitem, torch.Size: _torch_size,
}
# Handlers for functions of modules refcomp does not import (importing them costs seconds):
# matched on (module, qualname) when called.
NAMED_HANDLERS = {("torch.fx.experimental.symbolic_shapes", "expect_true"): _expect_true,
                   **rng.HANDLERS}
