"""The torch table: torch functions, Tensor methods and operators -> IR builders.

Owns: `TABLE` (callable -> `Entry`), `entry` (registration), `call_torch` (the one
way a torch call is traced) and the result markers builders return.  It holds no
entries: they live in refcomp/tracer/torch_ops.py (math) and
refcomp/tracer/tensor_layout.py (layout, dtype, indexing, attributes, Python-valued
queries), which register them when imported (refcomp/tracer/dispatch.py imports both),
as ir/ops/ modules register their OpDefs.  Every call is checked twice: torch itself
runs the op on meta tensors (the type oracle: dtype, shape, requires_grad and any
error eager would raise), and the IR the builder produced must have exactly that
dtype and shape, else the frame falls back (RB013) rather than risk a wrong
answer; the few entries flagged `ir_meta` skip the meta run (See Note [IR-typed meta]).
In-place ops are functionalized: the TensorVar takes the new IR value
and, if it is a graph input, is written back after the graph runs.  Spec:
spec/tracer.md, "Torch coverage".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy
import torch

from ir.graph import Value
from refcomp.reasons import (
    DATA_DEPENDENT_SHAPE,
    GRADIENT_CUT,
    INEXPRESSIBLE_OP,
    INFERENCE_TENSOR_UNDER_GRAD,
    INPLACE_ON_ALIAS,
    TENSOR_TO_PYTHON,
    TRACE_EXCEPTION,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.tracer import autocast, dynamic_floats, eager_layout, mutation
from refcomp.tracer.context import ir_dtype, meta_device, torch_dtype
from refcomp.tracer.values import VIEW_BASE, VT, ConstVar, TensorVar, TupleVar, as_python

T = torch.Tensor


@dataclass(frozen=True)
class Entry:
    build: Callable  # build(ctx, *args, **kwargs) -> ir Value | tuple | TensorVar | python
    view: bool = False  # result aliases the first tensor argument
    inplace: bool = False  # mutates the first tensor argument
    python: bool = False  # result is a Python value computed from the meta tensors
    creation: bool = False  # takes device=; the meta call runs on the meta device
    host: bool = False  # needs the tensor's value on the host: never capturable (RB002)
    sizes: bool = False  # takes sizes that may be symbolic (see Note [Dynamic batch])
    ir_meta: bool = False  # float operands: meta result from the IR type, not cross-checked
    pointwise: bool = False  # ir_meta's result keeps its operands' memory order (TensorIterator)
    # ir_meta only while no operand is channels_last: ATen then keeps that memory format
    # (cat, stack), and the meta run knows how (Note [IR-typed meta])
    memory_format: bool = False
    # eager's CPU kernel returns a 4-d result channels_last when a 4-d operand suggests
    # that format, whatever the meta kernel says: the result's meta takes it (Note
    # [IR-typed meta])
    channels_last: bool = False
    # eager's CPU kernel picks its result's strides by a rule of its own, whatever the meta
    # kernel says (conv2d's says row-major; refcomp/tracer/eager_layout.py): layout(meta,
    # *args, **kwargs), of the result's meta and the call's arguments (tensors as
    # TensorVars), gives them, or None to keep the meta's (Note [IR-typed meta])
    layout: Callable | None = None
    # the builder is right for complex operands (refcomp/tracer/complex_ops.py); any
    # other entry refuses a complex operand (RB013) and the call becomes opaque
    complex: bool = False


TABLE: dict = {}


def handles(*, varargs=False, kwargs=(), from_meta=()):
    """Declares how a builder handles torch parameters it does not read by name.

    varargs: its `*args` is read as torch's positional parameters (sizes, dims);
    kwargs: the keyword names its `**kwargs` honours; from_meta: parameters whose whole
    effect is read off torch's meta result (a creation's dtype, unflatten's sizes).
    tests/frontend/test_table_signatures.py walks every entry against torch's signature
    and takes these declarations as the builder's word (spec/correctness.md,
    "Arguments")."""
    def mark(build):
        build.handles_varargs = varargs
        build.handles_kwargs = tuple(kwargs)
        build.from_meta = tuple(from_meta)
        return build
    return mark


def has_entry(fn) -> bool:
    try:
        return fn in TABLE
    except TypeError:
        return False


def entry(*fns, **flags):
    def register(build):
        for fn in fns:
            TABLE[fn] = Entry(build, **flags)
        return build
    return register


# --- calling --------------------------------------------------------------------------------
def unwrap(vt):
    """A torch call's argument: constants as Python values, tensors kept symbolic."""
    try:
        return as_python(vt, keep_tensors=True)
    except TypeError:
        raise Unsupported(INEXPRESSIBLE_OP, f"argument {vt!r}") from None


def to_meta(x, ctx=None):
    """Arguments for the meta call: tensors as meta tensors, sizes at their traced value."""
    if isinstance(x, TensorVar):
        return x.meta
    if isinstance(x, dynamic_floats.FloatArg):  # a float for the meta kernel's dtypes
        return x.traced
    if isinstance(x, (list, tuple)):
        return type(x)(to_meta(i, ctx) for i in x)
    if isinstance(x, dict):
        return {k: to_meta(v, ctx) for k, v in x.items()}
    if isinstance(x, sympy.Basic):
        return ctx.concrete(x)
    if isinstance(x, slice):
        return slice(to_meta(x.start, ctx), to_meta(x.stop, ctx), to_meta(x.step, ctx))
    if isinstance(x, torch.device):
        # `m.to(device=x.device)`: a traced op stays on its operands' device (the entries
        # refuse a move), and a meta tensor moved to a real device has no data to copy.
        return torch.device("meta")
    return x


def _meta_device(x):
    if isinstance(x, str):
        try:
            torch.device(x)
        except RuntimeError:
            return x
        return torch.device("meta")
    return x


def _has_symbolic(x) -> bool:
    if isinstance(x, (list, tuple)):
        return any(_has_symbolic(i) for i in x)
    if isinstance(x, dict):
        return any(_has_symbolic(v) for v in x.values())
    return isinstance(x, sympy.Basic) and bool(x.free_symbols)


def specialize_sizes(ctx, x):
    if isinstance(x, (list, tuple)):
        return type(x)(specialize_sizes(ctx, i) for i in x)
    if isinstance(x, dict):
        return {k: specialize_sizes(ctx, v) for k, v in x.items()}
    if isinstance(x, sympy.Basic):
        return ctx.specialize(x)
    return x


def is_symbolic_shape(shape) -> bool:
    return any(not isinstance(d, int) for d in shape)


def tensors_in(x) -> list:
    if isinstance(x, TensorVar):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for i in x for t in tensors_in(i)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors_in(v)]
    return []


def _inplace_form(fn, args, kwargs):
    """The in-place op a functional's `inplace=True` calls (F.relu: torch.relu_), or None."""
    if fn is not torch.nn.functional.relu:
        return None
    flag = kwargs.get("inplace", args[1] if len(args) > 1 else None)
    return torch.relu_ if isinstance(flag, ConstVar) and flag.value is True else None


def call_torch(ctx, fn, args: list, kwargs: dict) -> VT:
    inplace = _inplace_form(fn, args, kwargs)
    if inplace is not None:  # `F.relu(x, inplace=True)` is torch.relu_(x), as in F.relu
        return call_torch(ctx, inplace, args[:1], {})
    e = TABLE[fn]
    if isinstance(kwargs.get("out"), TensorVar) and not e.inplace:
        result = _call_with_out(ctx, fn, args, kwargs)
        if result is not None:
            return result
    if e.host:
        e.build(ctx)
    pargs = [unwrap(a) for a in args]
    pkwargs = {k: unwrap(v) for k, v in kwargs.items()}
    name = getattr(fn, "__name__", str(fn))
    if not getattr(e.build, "float_scalars", False) and (dynamic_floats.has_float_arg(
            pargs) or dynamic_floats.has_float_arg(list(pkwargs.values()))):
        raise dynamic_floats.pin(args + list(kwargs.values()),
                                 f"{name} of a dynamic float")  # Note [Dynamic floats]
    if not e.sizes and (_has_symbolic(pargs) or _has_symbolic(pkwargs)):
        # A symbolic size where this op needs a number: specialize it (guarded).
        pargs, pkwargs = specialize_sizes(ctx, pargs), specialize_sizes(ctx, pkwargs)
    if not (e.inplace or e.python):  # under torch.autocast: Note [Autocast policy]
        pargs, pkwargs = autocast.cast_operands(ctx, fn, name, pargs, pkwargs,
                                                 new_tensor)
    operands = tensors_in(pargs) + tensors_in(pkwargs)
    if ctx.grad_enabled and not (e.inplace or e.view) and \
            any(t.grad_cut for t in operands) and any(t.requires_grad for t in operands):
        pargs, pkwargs, operands = _stop_gradients(ctx, pargs, pkwargs, operands)
    refuse_inference_under_grad(ctx, operands, name)
    if not e.complex and any(t.meta.is_complex() for t in operands):
        raise Unsupported(INEXPRESSIBLE_OP, f"{name} of a complex tensor (no complex rule)")
    if e.ir_meta and _float_operands(operands) and \
            not (e.memory_format and any(map(_channels_last, operands))):
        return _call_ir_typed(ctx, e, name, pargs, pkwargs, operands)
    margs, mkwargs = to_meta(pargs, ctx), to_meta(pkwargs, ctx)
    if e.creation or "device" in mkwargs:
        mkwargs["device"] = "meta"
    if fn is torch.Tensor.to:  # `.to("cpu")`: a device named by a string
        margs = [_meta_device(a) for a in margs]
    propagate = None
    if e.inplace:
        propagate = check_inplace(ctx, pargs[0], name, under_grad=True)
        mutation.refuse_overlapping_operands(pargs[0], operands, name)
        _refuse_uncastable_result(name, margs, mkwargs)
        margs[0] = margs[0].detach().clone()
    try:
        with torch.set_grad_enabled(ctx.grad_enabled), \
                meta_device(operands, pkwargs.get("device")):
            meta_out = fn(*margs, **mkwargs)
    except Unsupported:
        raise
    except Exception as err:  # eager raises this too; it runs (and raises) there
        if "cannot be called on meta tensors" in str(err):  # narrow's tensor `start`
            raise Unsupported(TENSOR_TO_PYTHON,
                              f"{name} reads the value of a tensor argument on the"
                                       " host") from None
        if "data-independent implementation does not exist" in str(err):
            # a meta kernel that is nonzero's (torch.where(cond)): a data-dependent shape
            raise Unsupported(DATA_DEPENDENT_SHAPE, f"{name}: its result's shape depends on"
                                                    " the values") from None
        raise Unsupported(TRACE_EXCEPTION, f"{name}: {type(err).__name__}: {err}") from None
    if e.python:
        return _python_query(ctx, fn, pargs, meta_out)
    if e.pointwise and not e.inplace and isinstance(meta_out, torch.Tensor) and \
            meta_out.numel() and operands:
        # some meta kernels (logical_or's, a Python reference) order a broadcast result
        # otherwise than TensorIterator where size-1 dims tie (corpus
        # logical_or_broadcast_permuted_strides)
        meta_out = eager_layout.restrided(
            meta_out, _pointwise_strides(meta_out.shape, operands, meta_out.dtype))
    if e.channels_last:
        meta_out = as_channels_last(meta_out, operands)
    if e.layout is not None and isinstance(meta_out, torch.Tensor) and meta_out.numel():
        meta_out = eager_layout.restrided(meta_out, e.layout(meta_out, *pargs, **pkwargs))
    built_from = len(ctx.builder.nodes)
    try:
        out = e.build(ctx, *pargs, **pkwargs)
    except Unsupported:
        raise
    except TypeError as err:  # an argument form this entry does not model
        raise Unsupported(INEXPRESSIBLE_OP, f"{name}: {err}") from None
    if e.inplace:
        tv = pargs[0]
        new = out.value if isinstance(out, TensorVar) else out
        reads_old = new is tv.value or \
            any(tv.value in n.inputs for n in ctx.builder.nodes[built_from:])
        grad = mutation.autograd_of_write(  # Note [In-place under grad]
            ctx, tv, operands, bool(getattr(meta_out, "requires_grad", False)) or
            (ctx.grad_enabled and tv.requires_grad), propagate, name, reads_old)
        result = apply_inplace(ctx, tv, out, meta_out, grad)
        if propagate is not None:
            propagate()
        return result
    step = view_step(fn, pargs, pkwargs, operands[0]) if e.view and name in VIEW_OPS and \
        operands else None
    return _pair(ctx, out, meta_out, operands, e, name, step)


def _stop_gradients(ctx, pargs, pkwargs, operands):
    """Each operand made by detach() or under no_grad (`grad_cut`) of an op that records
    gradients, as a `stop_gradient` of its value (Note [Stopped gradients],
    ir/ops/pointwise.py): the gradient reaches the other operands only, as in eager."""
    stopped = {id(t): TensorVar(ctx.builder.op("stop_gradient", t.value), t.meta,
                                alias=t.alias, is_view=t.is_view)
               for t in operands if t.grad_cut}

    def swap(x):
        if isinstance(x, TensorVar):
            return stopped.get(id(x), x)
        if isinstance(x, (list, tuple)):
            return type(x)(swap(i) for i in x)
        return x

    pargs = [swap(a) for a in pargs]
    pkwargs = {k: swap(v) for k, v in pkwargs.items()}
    return pargs, pkwargs, [stopped.get(id(t), t) for t in operands]


def _call_with_out(ctx, fn, args: list, kwargs: dict) -> VT:
    """`fn(..., out=t)` as `t.copy_(fn(...))`, returning t, where the result has t's shape
    and dtype and no operand needs autograd (eager raises there: out= ops are not
    differentiable): spectral_norm's power iteration writes its `_u`/`_v` buffers with
    `F.normalize(..., out=self._u)` under no_grad.  None where torch would resize or
    cast t: the entry's own handling of out= decides (an opaque call, or a break)."""
    out = kwargs["out"]
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    operands = tensors_in([unwrap(a) for a in args]) + tensors_in(
        [unwrap(v) for v in rest.values()])
    name = getattr(fn, "__name__", str(fn))
    if ctx.grad_enabled and any(t.requires_grad for t in operands + [out]):
        raise Unsupported(TRACE_EXCEPTION, f"{name}(out=...) of a tensor that requires grad:"
                          " eager raises")
    result = call_torch(ctx, fn, args, rest)  # unused where None is returned: dead code
    if not isinstance(result, TensorVar) or result.meta.shape != out.meta.shape or \
            result.meta.dtype != out.meta.dtype:
        return None
    return call_torch(ctx, torch.Tensor.copy_, [out, result], {})


# Note [Inference tensors under grad]: an op recorded by autograd (grad mode on, an
# operand requires grad) whose operand is an inference tensor raises "Inference tensors
# cannot be saved for backward" in eager where the op saves that operand (mul does, sub
# does not), when it runs -- even when its result is never used, which a graph would
# drop with the check (corpus pyworld_inference_tensor_saved_dead_result_missed_raise).
# Which operands an op saves is autograd's detail, so such an op runs in torch at a break
# (RB024) and eager decides; an inference tensor enters a trace only as an input (the
# `inference_mode` block itself breaks), and what is computed from it outside the block
# is a normal tensor.
def refuse_inference_under_grad(ctx, operands, name: str) -> None:
    if ctx.grad_enabled and any(t.inference for t in operands) and \
            any(t.requires_grad for t in operands):
        raise Unsupported(INFERENCE_TENSOR_UNDER_GRAD,
                          f"{name} of an inference tensor and a tensor that requires grad")


# Note [IR-typed meta]
# torch's meta kernels for some ops (native_layer_norm, native_batch_norm, addmm, gelu,
# where, clamp, cat, ...) are Python references (torch._refs / torch._decomp) wrapped in
# torch._disable_dynamo, whose first call imports torch._dynamo: ~0.9 s, once per process,
# which was most of a first compile.  Entries flagged `ir_meta` therefore skip the meta
# run when its tensor operands are floating point (and bool masks): the result's meta
# tensor is made from the IR type (dtype, shape; requires_grad as autograd sets it: grad
# mode on and an operand requires grad; strides: a `pointwise` entry's are torch's
# elementwise output strides of its operands, so Note [Output layout] restrides the result
# to eager's memory order).  They are not cross-checked on meta, because the
# check would cost that import; what it would catch is caught otherwise: the IR infer
# rules of these ops reject the operand shapes torch rejects (TypeError -> RB013, and eager
# then raises), and tests/frontend/test_ir_meta.py compares each against eager.  Integer
# or all-bool operands still take the meta run (promotion and refusals are subtle there),
# and so do a `memory_format` entry's channels_last operands: ATen's cat keeps its inputs'
# common suggested memory format (stack: the unsqueezed inputs' order), which only the
# meta kernel computes exactly (corpus cat_channels_last_strides).
# Which ops to flag was measured per torch version (spec/tracer.md, "Torch coverage").
def _channels_last(t) -> bool:
    m = t.meta
    return not m.is_contiguous() and (
        m.dim() == 4 and m.is_contiguous(memory_format=torch.channels_last) or
        m.dim() == 5 and m.is_contiguous(memory_format=torch.channels_last_3d))


def _float_operands(operands) -> bool:
    floats = [t.meta.is_floating_point() for t in operands]
    return any(floats) and all(f or t.meta.dtype == torch.bool
                               for f, t in zip(floats, operands))


def _pointwise_strides(shape, operands, dtype):
    """Eager's layout of a pointwise entry's result: the operands' memory order, as
    TensorIterator picks it; None where the result is not their broadcast."""
    metas = [t.meta for t in operands]
    shape = tuple(shape)
    if not metas or tuple(torch.broadcast_shapes(*(m.shape for m in metas))) != shape:
        return None
    return eager_layout.iterator_strides(shape, metas, eager_layout.common_dtype(metas, dtype))


def _call_ir_typed(ctx, e, name, pargs, pkwargs, operands):
    try:
        out = e.build(ctx, *pargs, **pkwargs)
    except Unsupported:
        raise
    except TypeError as err:  # a form this entry does not model, or one torch rejects
        raise Unsupported(INEXPRESSIBLE_OP, f"{name}: {err}") from None
    if not isinstance(out, Value):
        raise Unsupported(INEXPRESSIBLE_OP, f"{name}: an ir_meta entry must build one IR value")
    shape = [ctx.concrete(d) if not isinstance(d, int) else d for d in out.type.shape]
    # an empty result keeps the meta kernel's layout: ATen's kernels differ there
    strides = _pointwise_strides(shape, operands, torch_dtype(out.type.dtype)) \
        if e.pointwise and 0 not in shape else None
    if strides is None:
        meta = torch.empty(shape, dtype=torch_dtype(out.type.dtype), device="meta")
    else:
        meta = torch.empty_strided(shape, strides, dtype=torch_dtype(out.type.dtype),
                                   device="meta")
    if e.channels_last:
        meta = as_channels_last(meta, operands)
    if e.layout is not None and 0 not in shape:
        meta = eager_layout.restrided(meta, e.layout(meta, *pargs, **pkwargs))
    if ctx.grad_enabled and meta.is_floating_point() and \
            any(t.requires_grad for t in operands):
        meta.requires_grad_()
    return new_tensor(ctx, out, meta, operands, e.view)


def as_channels_last(meta, operands):
    """`meta` laid out channels_last (channels_last_3d) where eager's CPU kernel makes it
    so: a 4-d (5-d) result with elements, of an op with an operand of its rank whose
    suggested memory format is that one (entries flagged `channels_last`, the opaque ops
    of CHANNELS_LAST in refcomp/tracer/opaque.py)."""
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(
        meta.dim() if isinstance(meta, torch.Tensor) else None)
    if fmt is None or 0 in meta.shape or \
            not any(t.meta.dim() == meta.dim() and
                    eager_layout.suggest_memory_format(t.meta) == fmt for t in operands):
        return meta
    out = torch.empty(meta.shape, dtype=meta.dtype, device="meta", memory_format=fmt)
    return out.requires_grad_() if meta.requires_grad else out


def _pair(ctx, out, meta, operands, e, name, step=None):
    if isinstance(out, TensorVar):  # identity ops return their operand itself
        return out
    view = e.view
    if isinstance(out, Shaped) and operands and meta is getattr(operands[0], "meta", None):
        return operands[0]  # torch returned the tensor itself (flatten of a 1-d tensor)
    if isinstance(out, Shaped):
        out = _resolve_shaped(ctx, operands[0], out, meta)
    elif isinstance(out, Copy):
        # the operand's own value: a view of it for detach and a 0-d squeeze (corpus
        # squeeze_of_0d_input_is_a_view), a copy for clone/contiguous
        out, view = operands[0].value, name in ("detach", "squeeze")
        if not view:
            out = clone_copy(ctx, out)
    elif isinstance(out, Cast):
        x = operands[0]
        if meta is x.meta:
            return x  # torch returned the tensor itself (a no-op cast)
        if meta.dtype == x.meta.dtype:  # copy=True, or a new memory format: a fresh tensor
            out, view = clone_copy(ctx, x.value), False
        else:
            out, view = ctx.builder.cast(x.value, dtype=ir_dtype(meta.dtype)), False
    elif isinstance(out, Creation):
        out = out.make(meta)
    if isinstance(out, Value):
        if not isinstance(meta, torch.Tensor):
            raise Unsupported(INEXPRESSIBLE_OP, f"{name}: torch returns {type(meta).__name__}")
        check_type(out, meta, name, ctx)
        tv = new_tensor(ctx, out, meta, operands, view)
        if not view and operands and out is operands[0].value:  # a folded copy
            ctx.copy_aliases.add(id(tv.alias))
        if view and name in VIEW_OPS:
            tv.view_root = view_root(ctx, operands[0], tv, step)
        return tv
    if isinstance(out, tuple):
        if not isinstance(meta, (tuple, list)) or len(meta) != len(out):
            raise Unsupported(INEXPRESSIBLE_OP,
                              f"{name}: IR gives {len(out)} results, torch another"
                                       " number")
        cls = type(meta) if isinstance(meta, tuple) else tuple  # torch.return_types.*
        return TupleVar([_pair(ctx, o, m, operands, e, name,
                               step and step[:3] + (j,))
                         for j, (o, m) in enumerate(zip(out, meta))], cls=cls)
    return ctx.wrap(out, None)


def clone_copy(ctx, v: Value) -> Value:
    """A fresh tensor of `v`'s value (clone, a copying contiguous or cast): under grad, a
    `copy` node, so the clone is its own value, as it is its own tensor with its own
    version counter in eager (Note [Clones under grad], spec/autograd.md); else `v`
    itself (a folded copy).  The copies of a graph no output of which requires grad are
    folded again when the entry is built (`fold_clone_copies`, refcomp/aliasing.py)."""
    if not ctx.grad_enabled or v.type.dtype.extern_only:
        return v
    out = ctx.builder.copy(v)
    ctx.clone_copies.add(out)
    return out


def _python_query(ctx, fn, pargs, meta_out):
    """size()/numel() answer symbolically for dynamic sizes; the rest from the meta."""
    x = pargs[0] if pargs and isinstance(pargs[0], TensorVar) else None
    if x is not None and is_symbolic_shape(x.value.type.shape):
        shape = list(x.value.type.shape)
        if fn is T.size:
            if len(pargs) > 1:
                return ConstVar(shape[pargs[1]])
            return TupleVar([ConstVar(d) for d in shape], cls=torch.Size)
        if fn in (T.numel, T.nelement, torch.numel):
            return ConstVar(sympy.simplify(prod_of(shape)))
    return ctx.wrap(meta_out, None)


def check_type(value: Value, meta: torch.Tensor, name: str, ctx=None) -> None:
    want_dtype, want_shape = ir_dtype(meta.dtype), tuple(meta.shape)
    have = tuple(value.type.shape)
    if ctx is not None and is_symbolic_shape(have):
        have = tuple(ctx.concrete(d) for d in have)
    if value.type.dtype != want_dtype or have != want_shape:
        raise Unsupported(INEXPRESSIBLE_OP, f"{name}: IR gives {value.type}, torch gives"
                                   f" {meta.dtype} {list(want_shape)}")


def new_tensor(ctx, value, meta, operands, view) -> TensorVar:
    rg = bool(meta.requires_grad)
    if rg and not any(t.requires_grad for t in operands):
        # `torch.ones(3, requires_grad=True)`, `t.requires_grad_()`: a new leaf of
        # autograd.  A graph's outputs are not leaves that require grad (every backend
        # returned it without requires_grad), so it is made eagerly, at a break.
        raise Unsupported(UNSUPPORTED_CALL, "a new tensor that requires grad (a leaf of"
                                            " autograd made in the frame)")
    if ctx.grad_enabled and any(t.written_without_grad for t in operands):
        raise Unsupported(INPLACE_ON_ALIAS, "a parameter written under no_grad is an operand"
                                            " under grad"
                                            " (Note [Parameters written under no_grad])")
    cut_in = any(t.grad_cut for t in operands)
    if rg and cut_in:
        raise Unsupported(GRADIENT_CUT, "a detached / no_grad value feeds an op that records"
                                   " gradients")
    # Only a floating result can carry a gradient, so only it can be a cut: a comparison
    # or argmax of a tensor that requires grad is just an integer/bool value (where's
    # condition, gather's index), and feeding it on is no gradient cut.
    grad_cut = (meta.is_floating_point() or meta.is_complex()) and \
        (cut_in or (any(t.requires_grad for t in operands) and not rg))
    meta = meta.detach().requires_grad_(rg) if rg and meta.grad_fn is None else meta
    if view and operands:
        base = operands[0]
        return TensorVar(value, meta, requires_grad=rg, grad_cut=grad_cut, alias=base.alias,
                         is_view=True)
    return TensorVar(value, meta, requires_grad=rg, grad_cut=grad_cut)


# Torch ops whose result is a view of their first operand (reshape/view only when torch
# avoids a copy: the meta result must alias the input's meta tensor), as is basic
# indexing (tensor_layout.tensor_getitem).  A chain of them from a graph input keeps
# `view_root`: See Note [Returned views] in spec/correctness.md.
VIEW_OPS = frozenset({"reshape", "view", "flatten", "unflatten", "view_as", "reshape_as",
                      "expand", "broadcast_to", "expand_as", "permute", "transpose",
                      "swapaxes", "t", "unsqueeze", "squeeze", "split", "chunk",
                      "narrow", "detach", "diagonal", "view_as_real", "view_as_complex",
                      "real", "imag"})


def view_root(ctx, base, tv, step=None):
    """The graph input `tv` (made by a view op from `base`) is a pure view of, or None.
    `step`: the view op as `(fn, args, kwargs, item)` (TensorVar.view_steps), or None
    when it cannot be replayed on the caller's tensor."""
    root = base.view_root
    steps = base.view_steps
    if root is None and base.source is not None and \
            ctx.input_vars.get(base.source.name()) is base:
        root, steps = base, ()
    if root is None:
        # A view of an intermediate: its chain of view ops from the tensor that started it
        # (Note [Views of outputs] in spec/correctness.md).
        # A base that is itself such a view continues its chain, unless an in-place op
        # replaced its value since its view op made it: then the chain starts at it.
        start, steps = (base.view_base, base.view_steps) \
            if base.view_base is not None and base.value is base.view_made \
            else ((base, base.value), ())
        if steps is not None and step is not None and \
                torch._C._is_alias_of(tv.meta, base.meta):
            tv.view_base, tv.view_steps, tv.view_made = start, steps + (step,), tv.value
            tv.view_grad = ctx.grad_enabled and (not steps or base.view_grad)
        return None
    if not torch._C._is_alias_of(tv.meta, root.meta) or \
            (base.view_root is not None and base.view_grad != ctx.grad_enabled):
        return None  # a copy, or a chain made partly under no_grad: left a graph output
    tv.view_grad = ctx.grad_enabled
    tv.view_steps = None if steps is None or step is None else steps + (step,)
    if tv.view_steps is not None:  # Note [Writes through views of a graph input]
        tv.view_base = base.view_base if base.view_root is not None and \
            base.view_base is not None and base.value is base.view_made else (root, root.value)
        tv.view_made = tv.value
    return root


# `x.view_as(y)` and friends replay as `x.view(y's sizes)`: only y's sizes matter.
_SHAPED_BY_OTHER = {T.view_as: T.view, T.reshape_as: T.reshape, T.expand_as: T.expand}


def view_step(fn, pargs, pkwargs, base, item=None):
    """`fn(*pargs, **pkwargs)`, a view of `base`, as a replayable view step (view_root):
    `base` replaced by VIEW_BASE; None when another argument is a tensor that is not
    just a shape."""
    if fn in _SHAPED_BY_OTHER and len(pargs) == 2 and not pkwargs and \
            pargs[0] is base and isinstance(pargs[1], TensorVar):
        return (_SHAPED_BY_OTHER[fn], (VIEW_BASE, tuple(pargs[1].value.type.shape)), {},
                item)

    def mark(x):
        if x is base:
            return VIEW_BASE
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(mark(i) for i in x)
        if isinstance(x, dict):
            return {k: mark(v) for k, v in x.items()}
        return x

    args, kwargs = mark(tuple(pargs)), mark(dict(pkwargs))
    if tensors_in(list(args)) or tensors_in(kwargs):
        return None
    return (fn, args, kwargs, item)


def check_inplace(ctx, tv, name, under_grad=False):
    """Raise where eager's in-place semantics cannot be traced; return the propagation
    to run after the op when it writes through views (Note [Writes through views]).
    under_grad: the caller decides a write into a tensor that requires grad with
    mutation.autograd_of_write (Note [In-place under grad]); else it is refused."""
    if not isinstance(tv, TensorVar):
        raise Unsupported(INEXPRESSIBLE_OP, f"{name} on a non-tensor")
    propagate = None
    if ctx.shares_storage_with_live(tv):
        propagate = mutation.through_views(ctx, tv, ctx.live_tensors())
        if propagate is None:
            raise Unsupported(INPLACE_ON_ALIAS,
                              f"{name} on a tensor that shares storage with another"
                                       " live tensor")
    if tv.requires_grad and not under_grad:
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} on a tensor that requires grad")
    if ctx.saved_for_backward(tv):
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} on a tensor that an earlier op saved for its"
                                   " backward")
    refuse_self_overlap(tv, name)
    return propagate


def _refuse_uncastable_result(name, margs, mkwargs):
    """Eager's in-place op raises when its result type cannot be cast to the tensor's
    dtype (`b.mul_(2)` of a bool `b`: Long into Bool); meta kernels do not check it.  The
    out-of-place op's meta result gives the type; only integral or bool tensors can fail
    (complex operands break earlier).  The op then runs in eager, which raises."""
    out_of_place = getattr(torch.Tensor, name[:-1], None) if name.endswith("_") else None
    self_meta = margs[0] if margs else None
    if out_of_place is None or not isinstance(self_meta, torch.Tensor) or \
            self_meta.is_floating_point():
        return
    try:
        result = out_of_place(*margs, **mkwargs)
    except Exception:  # noqa: BLE001 -- the in-place meta run below reports errors
        return
    if isinstance(result, torch.Tensor) and not torch.can_cast(result.dtype, self_meta.dtype):
        raise Unsupported(TRACE_EXCEPTION, f"{name}: RuntimeError: result type {result.dtype} can't"
                                   f" be cast to the tensor's dtype {self_meta.dtype}")


def refuse_self_overlap(tv, name):
    """An in-place write into a tensor whose elements share memory (a stride-0 dim of an
    `expand`) writes each location once per alias in eager: a functional graph cannot say
    that, and eager raises for most such ops anyway (fill-like ops are allowed).  Breaking
    lets torch run the op, so both the allowed and the raising cases are eager's."""
    if mutation.has_shared_elements(tv.meta):
        raise Unsupported(INPLACE_ON_ALIAS, f"{name} on a tensor whose elements share memory"
                                   " (a stride-0 dim, e.g. from expand)")


def apply_inplace(ctx, tv: TensorVar, out, meta_out, grad=None) -> TensorVar:
    """`tv` takes the in-place op's result `out` (typed by `meta_out`); grad: its
    (requires_grad, grad_cut) from mutation.autograd_of_write, else unchanged."""
    if isinstance(out, TensorVar):
        out = out.value
    b = ctx.builder
    if out.type.shape != tv.value.type.shape:
        raise Unsupported(INEXPRESSIBLE_OP, "in-place result has a different shape")
    if out.type.dtype != tv.value.type.dtype:
        out = b.cast(out, dtype=tv.value.type.dtype)
    check_type(out, meta_out, "in-place op", ctx)
    tv.value = out
    if grad is not None:
        tv.requires_grad, tv.grad_cut = grad
    # the tensor keeps its layout and its meta storage (its views' metas view it: Note
    # [Overlapping writes]); meta_out gave the op's type, checked above
    tv.meta = tv.meta.detach().requires_grad_(True) if tv.requires_grad else tv.meta.detach()
    if tv.source is not None and tv.source.name() in ctx.input_vars:
        ctx.record_mutation(tv, tv)
    return tv


# --- helpers for builders -------------------------------------------------------------------
def _meta_or_scalar(x):
    return x.meta if isinstance(x, TensorVar) else x


def result_dtype(*xs):
    """torch's promotion over tensors and Python scalars (rank-0 tensors are weaker)."""
    vals = [_meta_or_scalar(x) for x in xs if x is not None]
    dt = vals[0] if not isinstance(vals[0], torch.Tensor) else None
    out = torch.result_type(vals[0], vals[1]) if len(vals) > 1 else (
        vals[0].dtype if isinstance(vals[0], torch.Tensor) else torch.tensor(dt).dtype)
    for v in vals[2:]:
        out = torch.promote_types(out, torch.result_type(v, torch.empty((), dtype=out,
                                                                        device="meta")))
    return out


def cast(ctx, x, dtype):
    """x as an IR value of torch dtype `dtype` (Python scalars stay scalars)."""
    if not isinstance(x, TensorVar):
        return x
    d = ir_dtype(dtype)
    v = x.value
    if v.type.dtype == d:
        return v
    out = ctx.builder.cast(v, dtype=d)
    ctx.eager_saves.casts[out] = v  # eager's op saves x itself (EagerSaves, ir/autodiff.py)
    return out


def as_dims(dim):
    if dim is None:
        return []
    return [dim] if isinstance(dim, int) else list(dim)


# --- result markers: what a builder asks call_torch to finish ---------------------------
def sizes_of(args):
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) \
        else list(args)


def ir_size(d):
    """A size as the IR wants it: an int, or a sympy expression with symbols."""
    if isinstance(d, sympy.Basic):
        d = sympy.simplify(d)
        if not d.is_Integer and not d.free_symbols:
            raise Unsupported(TRACE_EXCEPTION, f"size {d} is not an integer")
        return int(d) if d.is_Integer else d
    return d


class Shaped:
    """A reshape/expand to `shape` (sizes may be symbolic); None: the meta result's."""

    def __init__(self, kind, shape):
        self.kind = kind
        self.shape = shape


def _resolve_shaped(ctx, x: TensorVar, shaped: Shaped, meta) -> Value:
    if shaped.shape is None:
        if is_symbolic_shape(x.value.type.shape):
            raise Unsupported(INEXPRESSIBLE_OP, "unflatten of a tensor with a dynamic size")
        shape = list(meta.shape)
    else:
        shape = [ir_size(d) for d in shaped.shape]
    if shaped.kind == "reshape":
        return ctx.builder.reshape(x.value, shape=shape)
    return ctx.builder.broadcast_to(x.value, shape)


class Copy:
    """A fresh tensor with the operand's value (clone)."""


class Cast:
    def __init__(self, dtype):
        self.dtype = dtype


class Creation:
    def __init__(self, make):
        self.make = make


def prod_of(dims):
    n = 1
    for d in dims:
        n = n * d
    return n
