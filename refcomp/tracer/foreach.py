"""Foreach ops: `torch._foreach_<op>(lists, ...)` and `torch._foreach_<op>_(...)` traced as
one `<op>` per tensor, and torch's grouping of tensor lists by device and dtype.

Owns: `is_foreach`, `call_foreach`.  Spec: spec/tracer.md, Note [Foreach ops].
"""

from __future__ import annotations

import types

import torch

from refcomp.reasons import INEXPRESSIBLE_OP, UNSUPPORTED_CALL, Unsupported
from refcomp.tracer import dynamic_floats
from refcomp.tracer.values import (
    VT,
    ConstVar,
    DictVar,
    IteratorVar,
    ListVar,
    MethodVar,
    TensorVar,
    TupleVar,
)

_PREFIX = "_foreach_"
_GROUP = torch._C._group_tensors_by_device_and_dtype

# Per-tensor forms that are not `torch.<op>` / `Tensor.<op>_` of the same name.
_PER_TENSOR = {
    "norm": lambda x, ord=2, dtype=None: (torch.linalg.vector_norm, [x, ord],
                                          {"dtype": dtype} if dtype is not None else {}),
    "max": lambda x: (torch.amax, [x], {}),
}
# Composite in-place forms written as the out-of-place ops eager's CPU kernels compute
# (Note [Foreach ops]: lerp/addcmul/addcdiv have no table entry of their own).
_COMPOSITE = {"lerp", "addcmul", "addcdiv"}
_REFUSED = {"powsum", "mm", "copy"}


def is_foreach(fn) -> bool:
    if fn is _GROUP:
        return True
    name = getattr(fn, "__name__", "")
    return isinstance(name, str) and name.startswith(_PREFIX) and \
        getattr(torch, name, None) is fn


def call_foreach(tx, fn, args: list, kwargs: dict) -> VT:
    if fn is _GROUP:
        return _group(tx, args, kwargs)
    name = fn.__name__
    op = name[len(_PREFIX):]
    inplace = op.endswith("_")
    base = op.rstrip("_")
    if base in _REFUSED:
        raise Unsupported(UNSUPPORTED_CALL, f"torch.{name} has no per-tensor form here")
    if base in ("addcmul", "addcdiv"):  # the `Tensor scalars` overload: one per tensor
        args, kwargs = _scalars_as_list(tx, name, args, kwargs)
    lists = [a for a in args if isinstance(a, (ListVar, TupleVar))]
    if not lists or not isinstance(args[0], (ListVar, TupleVar)) and base != "pow":
        raise Unsupported(INEXPRESSIBLE_OP, f"torch.{name}: its first argument is not a list")
    n = len(lists[0].items)
    if any(len(a.items) != n for a in lists):
        # eager raises: the lists' lengths differ
        raise Unsupported(INEXPRESSIBLE_OP, f"torch.{name}: lists of different lengths")
    results = []
    for i in range(n):
        a = [x.items[i] if isinstance(x, (ListVar, TupleVar)) else x for x in args]
        k = {key: v.items[i] if isinstance(v, (ListVar, TupleVar)) else v
             for key, v in kwargs.items()}
        results.append(_one(tx, name, base, inplace, a, k))
    return ConstVar(None) if inplace else ListVar(results)


def _scalars_as_list(tx, name, args, kwargs):
    """addcmul/addcdiv's 1-d tensor of scalars (`_foreach_addcdiv_(ps, a, b, t)`, what
    torch.optim's Adam passes while compiling) is one scalar per tensor: its items."""
    from refcomp.tracer.tensor_layout import tensor_getitem

    args, kwargs = list(args), dict(kwargs)
    where = (args, 3) if len(args) > 3 else (kwargs, "scalars") if "scalars" in kwargs \
        else (None, None)
    if where[0] is None or not isinstance(where[0][where[1]], TensorVar):
        return args, kwargs
    t = where[0][where[1]]
    n = len(args[0].items) if isinstance(args[0], (ListVar, TupleVar)) else -1
    if t.meta.dim() != 1 or t.meta.shape[0] != n:
        raise Unsupported(INEXPRESSIBLE_OP, f"torch.{name}: a tensor of scalars that is not"
                                            " one per tensor")
    where[0][where[1]] = ListVar([tensor_getitem(tx.ctx, t, ConstVar(i)) for i in range(n)])
    if where[1] == "scalars":
        kwargs["value"] = kwargs.pop("scalars")
    return args, kwargs


def _one(tx, name, base, inplace, args, kwargs) -> VT:
    if base in _COMPOSITE:
        out = _composite(tx, base, args, kwargs)
        if not inplace:
            return out
        return tx.call_function(MethodVar("copy_", args[0], "copy_"), [out], {})
    if base in _PER_TENSOR:
        if inplace:
            raise Unsupported(UNSUPPORTED_CALL, f"torch.{name}")
        fn, a, k = _PER_TENSOR[base](*args, **kwargs)
        return tx.call_function(ConstVar(fn), a, k)
    if base in ("clamp_min", "clamp_max"):
        key = "min" if base == "clamp_min" else "max"
        if isinstance(args[1], TensorVar):
            fn = torch.maximum if key == "min" else torch.minimum
            out = tx.call_function(ConstVar(fn), args, kwargs)
        else:
            out = tx.call_function(ConstVar(torch.clamp), [args[0]], {key: args[1]})
        return tx.call_function(MethodVar("copy_", args[0], "copy_"), [out], {}) \
            if inplace else out
    if inplace:
        if not isinstance(args[0], TensorVar):
            raise Unsupported(INEXPRESSIBLE_OP, f"torch.{name} of a list item that is not a"
                                                " tensor")
        if not hasattr(torch.Tensor, base + "_") and hasattr(torch, base):
            # `_foreach_maximum_` (Adam's amsgrad, Adamax): no `Tensor.maximum_`, so the
            # out-of-place op written into the tensor
            out = tx.call_function(ConstVar(getattr(torch, base)), args, kwargs)
            return tx.call_function(MethodVar("copy_", args[0], "copy_"), [out], {})
        return tx.call_function(MethodVar(base + "_", args[0], base + "_"), args[1:], kwargs)
    fn = getattr(torch, base, None)
    if fn is None:
        raise Unsupported(UNSUPPORTED_CALL, f"torch.{name} has no per-tensor torch.{base}")
    return tx.call_function(ConstVar(fn), args, kwargs)


def _composite(tx, base, args, kwargs) -> VT:
    """lerp(x, end, w), addcmul(x, a, b, value), addcdiv(x, a, b, value) out of place, as
    eager's CPU kernels order them (up to their fused multiply-add: Note [Foreach ops])."""
    def call(fn, *a):
        return tx.call_function(ConstVar(fn), list(a), {})

    x = args[0]
    if base == "lerp":
        end = args[1]
        w = args[2] if len(args) > 2 else kwargs["weight"]
        if isinstance(w, TensorVar):
            return call(torch.lerp, x, end, w)  # one op (opaque or table), as eager's
        diff = call(torch.sub, end, x)
        if abs(w.value) < 0.5:
            return call(torch.add, x, call(torch.mul, diff, w))
        return call(torch.sub, end, call(torch.mul, diff, ConstVar(1 - w.value)))
    a, b = args[1], args[2]
    value = args[3] if len(args) > 3 else kwargs.get("value", ConstVar(1))
    scaled = call(torch.mul, a, value)
    return call(torch.add, x, call(torch.mul if base == "addcmul" else torch.div, scaled, b))


def _group(tx, args, kwargs) -> VT:
    """torch._C._group_tensors_by_device_and_dtype(tensorlistlist, with_indices): the
    lists whose first list's tensors share one device and dtype, as one group (several
    groups: the C++ map's key order is not traced, so a break)."""
    from refcomp.tracer.tensor_layout import _real_device

    lists = args[0]
    if not isinstance(lists, (ListVar, TupleVar)) or not lists.items or \
            not all(isinstance(li, (ListVar, TupleVar)) for li in lists.items):
        raise Unsupported(INEXPRESSIBLE_OP, "_group_tensors_by_device_and_dtype of a"
                                            " non-list")
    first = lists.items[0].items
    if not all(isinstance(t, TensorVar) for t in first):
        raise Unsupported(INEXPRESSIBLE_OP, "_group_tensors_by_device_and_dtype: the first"
                                            " list holds a non-tensor")
    if not first:
        return DictVar({})
    keys = {(_real_device(t), t.meta.dtype) for t in first}
    if len(keys) != 1:
        raise Unsupported(UNSUPPORTED_CALL, "_group_tensors_by_device_and_dtype of tensors on"
                                            " several devices or dtypes")
    key = keys.pop()
    grouped = ListVar([ListVar(list(li.items)) for li in lists.items])
    indices = ListVar([ConstVar(i) for i in range(len(first))])
    return DictVar({key: TupleVar([grouped, indices])})


def bind_function(fn, args, kwargs) -> VT:
    """`fn.__get__(obj[, cls])`: the method `fn` bound to the traced `obj` (the LR
    scheduler's wrapper of `optimizer.step` binds the optimizer's own `step` so)."""
    if kwargs or not 1 <= len(args) <= 2 or isinstance(args[0], ConstVar) and \
            args[0].value is None:
        raise Unsupported(UNSUPPORTED_CALL, f"{fn.__qualname__}.__get__ of no object")
    return MethodVar(fn, args[0], fn.__name__)


_USE_GRAD = "_use_grad_for_differentiable.<locals>._use_grad"


def is_optimizer_graph_break(tx, fn, args, kwargs) -> bool:
    """`torch._dynamo.graph_break()` called by torch.optim's `_use_grad` wrapper of a
    step.  It is there for AOTAutograd's functionalization (torch/optim/optimizer.py);
    refcomp writes the step's in-place updates back as they are, so it is no break here
    (Note [Optimizer steps]).  Anywhere else graph_break() stays the break it asks for."""
    import torch.optim.optimizer as optimizer

    return isinstance(fn, ConstVar) and fn.value is torch._dynamo.graph_break and \
        not args and not kwargs and tx.code.co_qualname == _USE_GRAD and \
        tx.code.co_filename == optimizer.__file__


def is_init_group(tx, fn, args, kwargs) -> bool:
    """`self._init_group(group, lists...)` of a torch.optim optimizer read with a source."""
    return isinstance(fn, MethodVar) and callable(fn.fn) and \
        getattr(fn.fn, "__name__", None) == "_init_group" and \
        getattr(fn.fn, "__module__", "").startswith("torch.optim.") and \
        isinstance(fn.self_vt, ConstVar) and fn.self_vt.source is not None and \
        isinstance(fn.self_vt.value, torch.optim.Optimizer)


def init_group(tx, fn: MethodVar, args, kwargs) -> VT:
    """Note [Optimizer steps]: `_init_group` runs for real, once, while tracing (as under
    Dynamo): it makes the state a first step makes lazily (zeros, a step of 0) and lists
    the group's parameters with a gradient, their gradients and their state.  Each listed
    tensor is then the traced value of its source -- the parameter's, `<p>.grad`,
    `<opt>.state[<p>][key]` -- so the step's updates are writes to graph inputs.  Guarded:
    every parameter's `.grad` (tensor facts, or None) and each state dict's keys and
    tensors."""
    from refcomp.sources import AttrSource, ItemSource, TensorKeySource
    from refcomp.tracer.tensor_layout import _input_grad

    ctx, opt_vt = tx.ctx, fn.self_vt
    opt = opt_vt.value
    group_vt, lists = (args[0] if args else None), list(args[1:])
    groups = AttrSource(opt_vt.source, "param_groups")
    real_group = next((g for k, g in enumerate(opt.param_groups)
                       if isinstance(group_vt, DictVar) and group_vt.source is not None and
                       group_vt.source.name() == ItemSource(groups, k).name()), None)
    if kwargs or real_group is None or \
            not all(isinstance(li, ListVar) and not li.items for li in lists):
        raise Unsupported(UNSUPPORTED_CALL, f"{type(opt).__name__}._init_group of a group or"
                                            " lists not read from the optimizer")
    params_vt = group_vt.items.get("params")
    if not isinstance(params_vt, ListVar) or \
            not all(isinstance(p, TensorVar) for p in params_vt.items):
        raise Unsupported(UNSUPPORTED_CALL, "_init_group: the group's params are not tensors")
    known = {}
    for p, pv in zip(real_group["params"], params_vt.items):
        known[id(p)] = pv
        g = _input_grad(ctx, pv)
        if isinstance(g, TensorVar):
            known[id(p.grad)] = g
    real_lists = [[] for _ in lists]
    result = fn.fn(opt, real_group, *real_lists)
    state_source = AttrSource(opt_vt.source, "state")
    for p, pv in zip(real_group["params"], params_vt.items):
        if p in opt.state:
            st = ctx.wrap(opt.state[p], TensorKeySource(state_source, pv.source))
            for key, v in getattr(st, "items", {}).items():
                if isinstance(v, TensorVar):
                    known[id(opt.state[p][key])] = v
    for lv, real in zip(lists, real_lists):
        for t in real:
            if t is not None and id(t) not in known:
                raise Unsupported(UNSUPPORTED_CALL, "_init_group listed a tensor that is not a"
                                                    " parameter, gradient or state")
            lv.items.append(ConstVar(None) if t is None else known[id(t)])
    return ctx.wrap(result, None)


def tensor_keyed_item(tx, obj: ConstVar, key: TensorVar) -> VT:
    """`d[t]` of a real dict keyed by tensors (an optimizer's `state[p]`), `t` a graph
    input: the item at source `d[<t>]` (guarded as any read), or a break where `t` is
    not a key (a defaultdict would make an entry: eager runs it)."""
    from refcomp.sources import TensorKeySource

    real = tx.ctx.examples.get(key.source.name()) if key.source is not None else None
    if real is None or tx.ctx.input_vars.get(key.source.name()) is not key or \
            real not in obj.value:
        raise Unsupported(UNSUPPORTED_CALL, "item of a tensor-keyed dict at a key the trace"
                                            " cannot name")
    return tx.ctx.wrap(dict.__getitem__(obj.value, real), TensorKeySource(obj.source,
                                                                          key.source))


def composite_method(tx, name, args, kwargs):
    """`x.addcdiv_(a, b, value=v)`, `x.addcmul_(...)`, `x.lerp_(end, w)` of float tensors
    of one shape and a number (or 0-d tensor) `v`/`w`: written out as eager's CPU kernels
    order them (Note [Foreach ops]), so they fuse with the ops around them; None where
    the op is left to its table entry or opaque call.  A 0-d tensor `value` is what
    torch.optim's single-tensor step passes while compiling (eager reads it as a number)."""
    base = name.rstrip("_")
    tensors = [a for a in args if isinstance(a, TensorVar)]
    value = kwargs.get("value", kwargs.get("weight"))
    if base == "lerp":
        value = args[2] if len(args) > 2 else value
        if len(args) > 3 or set(kwargs) - {"weight"}:
            return None
        tensors = tensors[:2]
    elif len(args) != 3 or set(kwargs) - {"value"}:
        return None
    if len(tensors) != (2 if base == "lerp" else 3) or not all(
            t.meta.is_floating_point() and t.meta.dtype == args[0].meta.dtype and
            t.meta.shape == args[0].meta.shape for t in tensors):
        return None
    if isinstance(value, TensorVar):
        if value.meta.dim() != 0 or base == "lerp" or not value.meta.is_floating_point():
            return None
    elif not (value is None and base != "lerp" or base != "lerp" and
              dynamic_floats.is_dynamic(value) or  # Note [Dynamic floats]
              isinstance(value, ConstVar) and type(value.value) in (int, float)):
        return None
    out = _composite(tx, base, args, kwargs)
    if name.endswith("_"):
        return tx.call_function(MethodVar("copy_", args[0], "copy_"), [out], {})
    return out


def is_module_parameters(tx, fn, args, kwargs) -> bool:
    """`module.parameters()` of a module read with a source, the method nn.Module's own."""
    return isinstance(fn, MethodVar) and fn.fn is torch.nn.Module.parameters and \
        isinstance(fn.self_vt, ConstVar) and fn.self_vt.source is not None and \
        isinstance(fn.self_vt.value, torch.nn.Module) and not kwargs and \
        all(isinstance(a, ConstVar) and a.value is True for a in args)


def module_parameters(tx, fn: MethodVar, args, kwargs) -> VT:
    """`model.parameters()`, a generator in eager, is the list of its parameters read
    through the module tree (each submodule and parameter guarded as any attribute read),
    with each tree level's `_modules` and `_parameters` names guarded; one parameter
    reached twice is listed once, as `remove_duplicate` does.  The consumer iterates it
    as the generator it is in eager (Note [Optimizer steps])."""
    from refcomp import guard_kinds as G
    from refcomp.sources import MODULE, PARAM, ModuleDictSource

    ctx, out, seen = tx.ctx, [], set()
    todo = [fn.self_vt]
    done = set()
    while todo:
        vt = todo.pop(0)
        module = vt.value
        if id(module) in done:
            continue
        done.add(id(module))
        for where in (PARAM, MODULE):
            d = getattr(module, where)
            ctx.add_guard(G.DICT_KEYS, ModuleDictSource(vt.source, where), (type(d), tuple(d)))
        for name in module._parameters:
            p = tx.load_attr(vt, name)
            if isinstance(p, TensorVar) and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        todo.extend(tx.load_attr(vt, name) for name in module._modules
                    if module._modules[name] is not None)
    return ParameterIteratorVar(out)


class ParameterIteratorVar(IteratorVar):
    """The generator `model.parameters()` returns in eager, its items known."""

    def python_type(self):
        return types.GeneratorType
