"""The torch table: torch functions, Tensor methods and operators -> IR builders.

Owns: `TABLE` (callable -> `Entry`), `call_torch`, and the Tensor attribute,
indexing and item-assignment rules.  Every call is checked twice: torch itself
runs the op on meta tensors (the type oracle: dtype, shape, requires_grad and any
error eager would raise), and the IR the builder produced must have exactly that
dtype and shape, else the frame falls back (RB013) rather than risk a wrong
answer.  In-place ops are functionalized: the TensorVar takes the new IR value
and, if it is a graph input, is written back after the graph runs.  Spec:
spec/tracer.md, "Torch coverage".
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import sympy
import torch
import torch.nn.functional as F

from ir.graph import Value
from refcomp.reasons import Unsupported
from refcomp.tracer.context import ir_device, ir_dtype
from refcomp.tracer.values import VT, ConstVar, DictVar, ListVar, TensorVar, TupleVar

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


TABLE: dict = {}


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
def _unwrap(vt):
    if isinstance(vt, TensorVar):
        return vt
    if isinstance(vt, ConstVar):
        return vt.value
    if isinstance(vt, TupleVar):
        return tuple(_unwrap(i) for i in vt.items)
    if isinstance(vt, ListVar):
        return [_unwrap(i) for i in vt.items]
    if isinstance(vt, DictVar):
        return {k: _unwrap(v) for k, v in vt.items.items()}
    raise Unsupported("RB013", f"argument {vt!r}")


def _to_meta(x, ctx=None):
    """Arguments for the meta call: tensors as meta tensors, sizes at their traced value."""
    if isinstance(x, TensorVar):
        return x.meta
    if isinstance(x, (list, tuple)):
        return type(x)(_to_meta(i, ctx) for i in x)
    if isinstance(x, dict):
        return {k: _to_meta(v, ctx) for k, v in x.items()}
    if isinstance(x, sympy.Basic):
        return ctx.concrete(x)
    return x


def _has_symbolic(x) -> bool:
    if isinstance(x, (list, tuple)):
        return any(_has_symbolic(i) for i in x)
    if isinstance(x, dict):
        return any(_has_symbolic(v) for v in x.values())
    return isinstance(x, sympy.Basic) and bool(x.free_symbols)


def _specialize(ctx, x):
    if isinstance(x, (list, tuple)):
        return type(x)(_specialize(ctx, i) for i in x)
    if isinstance(x, dict):
        return {k: _specialize(ctx, v) for k, v in x.items()}
    if isinstance(x, sympy.Basic):
        return ctx.specialize(x)
    return x


def is_symbolic_shape(shape) -> bool:
    return any(not isinstance(d, int) for d in shape)


def _tensors(x) -> list:
    if isinstance(x, TensorVar):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for i in x for t in _tensors(i)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def call_torch(ctx, fn, args: list, kwargs: dict) -> VT:
    e = TABLE[fn]
    if e.host:
        e.build(ctx)
    pargs = [_unwrap(a) for a in args]
    pkwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    name = getattr(fn, "__name__", str(fn))
    if not e.sizes and (_has_symbolic(pargs) or _has_symbolic(pkwargs)):
        # A symbolic size where this op needs a number: specialize it (guarded).
        pargs, pkwargs = _specialize(ctx, pargs), _specialize(ctx, pkwargs)
    operands = _tensors(pargs) + _tensors(pkwargs)
    margs, mkwargs = _to_meta(pargs, ctx), _to_meta(pkwargs, ctx)
    if e.creation:
        mkwargs["device"] = "meta"
    if e.inplace:
        _check_inplace(ctx, pargs[0], name)
        margs[0] = margs[0].detach().clone()
    try:
        with torch.set_grad_enabled(ctx.grad_enabled):
            meta_out = fn(*margs, **mkwargs)
    except Unsupported:
        raise
    except Exception as err:  # eager raises this too; it runs (and raises) there
        raise Unsupported("RB017", f"{name}: {type(err).__name__}: {err}") from None
    if e.python:
        return _python_query(ctx, fn, pargs, meta_out)
    try:
        out = e.build(ctx, *pargs, **pkwargs)
    except Unsupported:
        raise
    except TypeError as err:  # an argument form this entry does not model
        raise Unsupported("RB013", f"{name}: {err}") from None
    if e.inplace:
        return _apply_inplace(ctx, pargs[0], out, meta_out)
    return _pair(ctx, out, meta_out, operands, e, name)


def _pair(ctx, out, meta, operands, e, name):
    if isinstance(out, TensorVar):  # identity ops return their operand itself
        return out
    view = e.view
    if isinstance(out, _Shaped):
        out = _resolve_shaped(ctx, operands[0], out, meta)
    elif isinstance(out, _Copy):
        out, view = operands[0].value, name in ("detach",)
    elif isinstance(out, _Cast):
        x = operands[0]
        if meta.dtype == x.meta.dtype:
            out = x.value  # torch returns the tensor itself: an alias
        else:
            out, view = ctx.builder.cast(x.value, dtype=ir_dtype(meta.dtype)), False
    elif isinstance(out, _Creation):
        out = out.make(meta)
    if isinstance(out, Value):
        if not isinstance(meta, torch.Tensor):
            raise Unsupported("RB013", f"{name}: torch returns {type(meta).__name__}")
        _check_type(out, meta, name, ctx)
        return _new_tensor(ctx, out, meta, operands, view)
    if isinstance(out, tuple):
        return TupleVar([_pair(ctx, o, m, operands, e, name) for o, m in zip(out, meta)])
    return ctx.wrap(out, None)


def _python_query(ctx, fn, pargs, meta_out):
    """size()/numel() answer symbolically for dynamic sizes; the rest from the meta."""
    x = pargs[0] if pargs and isinstance(pargs[0], TensorVar) else None
    if x is not None and is_symbolic_shape(x.value.type.shape):
        shape = list(x.value.type.shape)
        if fn is T.size:
            if len(pargs) > 1:
                return ConstVar(shape[pargs[1]])
            return TupleVar([ConstVar(d) for d in shape])
        if fn in (T.numel, T.nelement, torch.numel):
            return ConstVar(sympy.simplify(_prod(shape)))
    return ctx.wrap(meta_out, None)


def _check_type(value: Value, meta: torch.Tensor, name: str, ctx=None) -> None:
    want_dtype, want_shape = ir_dtype(meta.dtype), tuple(meta.shape)
    have = tuple(value.type.shape)
    if ctx is not None and is_symbolic_shape(have):
        have = tuple(ctx.concrete(d) for d in have)
    if value.type.dtype != want_dtype or have != want_shape:
        raise Unsupported("RB013", f"{name}: IR gives {value.type}, torch gives"
                                   f" {meta.dtype} {list(want_shape)}")


def _new_tensor(ctx, value, meta, operands, view) -> TensorVar:
    rg = bool(meta.requires_grad)
    cut_in = any(t.grad_cut for t in operands)
    if rg and cut_in:
        raise Unsupported("RB011", "a detached / no_grad value feeds an op that records"
                                   " gradients")
    grad_cut = cut_in or (any(t.requires_grad for t in operands) and not rg)
    meta = meta.detach().requires_grad_(rg) if rg and meta.grad_fn is None else meta
    if view and operands:
        base = operands[0]
        return TensorVar(value, meta, requires_grad=rg, grad_cut=grad_cut, alias=base.alias,
                         is_view=True)
    return TensorVar(value, meta, requires_grad=rg, grad_cut=grad_cut)


def _check_inplace(ctx, tv, name):
    if not isinstance(tv, TensorVar):
        raise Unsupported("RB013", f"{name} on a non-tensor")
    if ctx.shares_storage_with_live(tv):
        raise Unsupported("RB010", f"{name} on a tensor that shares storage with another"
                                   " live tensor")
    if tv.requires_grad:
        raise Unsupported("RB010", f"{name} on a tensor that requires grad")


def _apply_inplace(ctx, tv: TensorVar, out, meta_out) -> TensorVar:
    if isinstance(out, TensorVar):
        out = out.value
    b = ctx.builder
    if out.type.shape != tv.value.type.shape:
        raise Unsupported("RB013", "in-place result has a different shape")
    if out.type.dtype != tv.value.type.dtype:
        out = b.cast(out, dtype=tv.value.type.dtype)
    _check_type(out, meta_out, "in-place op", ctx)
    tv.value = out
    tv.meta = meta_out.detach()
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
    return v if v.type.dtype == d else ctx.builder.cast(v, dtype=d)


def _dims(dim):
    if dim is None:
        return []
    return [dim] if isinstance(dim, int) else list(dim)


# --- pointwise ------------------------------------------------------------------------------
_UNARY = {
    "neg": (torch.neg, T.neg, operator.neg, T.negative, torch.negative),
    "abs": (torch.abs, T.abs),
    "relu": (torch.relu, T.relu, F.relu),
    "sign": (torch.sign, T.sign),
    "floor": (torch.floor, T.floor), "ceil": (torch.ceil, T.ceil),
    "round": (torch.round, T.round), "trunc": (torch.trunc, T.trunc),
    "exp": (torch.exp, T.exp), "log": (torch.log, T.log),
    "log1p": (torch.log1p, T.log1p), "expm1": (torch.expm1, T.expm1),
    "sqrt": (torch.sqrt, T.sqrt), "rsqrt": (torch.rsqrt, T.rsqrt),
    "sin": (torch.sin, T.sin), "cos": (torch.cos, T.cos),
    "tanh": (torch.tanh, T.tanh, F.tanh), "sigmoid": (torch.sigmoid, T.sigmoid, F.sigmoid),
    "erf": (torch.erf, T.erf), "silu": (F.silu,),
    "reciprocal": (torch.reciprocal, T.reciprocal),
    "logical_not": (torch.logical_not, T.logical_not),
    "isnan": (torch.isnan, T.isnan),
    "bitwise_not": (torch.bitwise_not, T.bitwise_not, operator.invert),
}
_INPLACE_UNARY = {"relu": (torch.relu_, T.relu_), "neg": (T.neg_,), "abs": (T.abs_,),
                  "exp": (T.exp_,), "sqrt": (T.sqrt_,), "sigmoid": (T.sigmoid_,),
                  "tanh": (T.tanh_,)}


def _unary_builder(op):
    def build(ctx, x, *args, **kwargs):
        if op == "relu" and args and args[0]:  # F.relu(x, inplace=True)
            raise Unsupported("RB010", "F.relu(inplace=True)")
        if kwargs.get("inplace"):
            raise Unsupported("RB010", f"{op}(inplace=True)")
        return ctx.builder.op(op, x.value)
    return build


for _op, _fns in _UNARY.items():
    entry(*_fns)(_unary_builder(_op))
for _op, _fns in _INPLACE_UNARY.items():
    entry(*_fns, inplace=True)(_unary_builder(_op))


@entry(operator.pos)
def _pos(ctx, x):
    return x


@entry(F.gelu)
def _gelu(ctx, x, approximate="none"):
    return ctx.builder.gelu(x.value, approximate=approximate)


@entry(F.leaky_relu)
def _leaky_relu(ctx, x, negative_slope=0.01, inplace=False):
    if inplace:
        raise Unsupported("RB010", "leaky_relu(inplace=True)")
    b = ctx.builder
    return b.where(b.gt(x.value, 0), x.value, b.mul(x.value, negative_slope))


_BINARY = {
    "add": (torch.add, T.add, operator.add, T.__radd__),
    "sub": (torch.sub, T.sub, operator.sub, torch.subtract),
    "mul": (torch.mul, T.mul, operator.mul, torch.multiply, T.__rmul__),
    "div": (torch.div, T.div, operator.truediv, torch.true_divide, torch.divide),
    "floor_divide": (torch.floor_divide, T.floor_divide, operator.floordiv),
    "remainder": (torch.remainder, T.remainder, operator.mod),
    "fmod": (torch.fmod, T.fmod),
    "pow": (torch.pow, T.pow, operator.pow),
    "maximum": (torch.maximum, T.maximum), "minimum": (torch.minimum, T.minimum),
    "atan2": (torch.atan2, T.atan2),
    "eq": (torch.eq, T.eq, operator.eq), "ne": (torch.ne, T.ne, operator.ne),
    "lt": (torch.lt, T.lt, operator.lt), "le": (torch.le, T.le, operator.le),
    "gt": (torch.gt, T.gt, operator.gt), "ge": (torch.ge, T.ge, operator.ge),
    "logical_and": (torch.logical_and, T.logical_and),
    "logical_or": (torch.logical_or, T.logical_or),
    "logical_xor": (torch.logical_xor, T.logical_xor),
    "bitwise_and": (torch.bitwise_and, T.bitwise_and, operator.and_),
    "bitwise_or": (torch.bitwise_or, T.bitwise_or, operator.or_),
    "bitwise_xor": (torch.bitwise_xor, T.bitwise_xor, operator.xor),
}
_INPLACE_BINARY = {"add": (T.add_,), "sub": (T.sub_,), "mul": (T.mul_,), "div": (T.div_,),
                   "floor_divide": (T.floor_divide_,), "remainder": (T.remainder_,),
                   "pow": (T.pow_,), "bitwise_and": (T.bitwise_and_,),
                   "bitwise_or": (T.bitwise_or_,), "bitwise_xor": (T.bitwise_xor_,)}
_REVERSED = {operator.matmul}


def _binary_builder(op):
    def build(ctx, a, b, *, alpha=1, rounding_mode=None, out=None):
        if out is not None:
            raise Unsupported("RB008", f"{op}(out=...)")
        dt = result_dtype(a, b)
        if op in ("add", "sub") and alpha != 1:
            b = ctx.builder.mul(cast(ctx, b, dt), alpha) if isinstance(b, TensorVar) \
                else b * alpha
            b = _AsValue(b) if isinstance(b, Value) else b
        x, y = cast(ctx, a, dt), (b.value if isinstance(b, _AsValue) else cast(ctx, b, dt))
        name = op
        if op == "div" and rounding_mode is not None:
            if rounding_mode == "floor":
                name = "floor_divide"
            elif rounding_mode == "trunc":
                q = ctx.builder.div(x, y)
                return ctx.builder.cast(ctx.builder.trunc(q), dtype=ir_dtype(dt)) \
                    if not dt.is_floating_point else ctx.builder.trunc(q)
            else:
                raise TypeError(f"rounding_mode {rounding_mode!r}")
        if not isinstance(x, Value) and not isinstance(y, Value):
            raise TypeError("no tensor operand")
        return ctx.builder.op(name, x, y)
    return build


class _AsValue:
    def __init__(self, value):
        self.value = value


for _op, _fns in _BINARY.items():
    entry(*_fns)(_binary_builder(_op))
for _op, _fns in _INPLACE_BINARY.items():
    entry(*_fns, inplace=True)(_binary_builder(_op))


@entry(T.__rsub__)
def _rsub(ctx, a, b):
    return _binary_builder("sub")(ctx, b, a)


@entry(T.__rtruediv__)
def _rdiv(ctx, a, b):
    return _binary_builder("div")(ctx, b, a)


@entry(T.__rpow__)
def _rpow(ctx, a, b):
    return _binary_builder("pow")(ctx, b, a)


@entry(torch.where, T.where)
def _where(ctx, cond, a=None, b=None):
    if a is None:
        raise Unsupported("RB013", "torch.where(cond) has a data-dependent shape")
    dt = result_dtype(a, b)
    c = cond.value if isinstance(cond, TensorVar) else cond
    return ctx.builder.where(c, cast(ctx, a, dt), cast(ctx, b, dt))


@entry(T.masked_fill)
def _masked_fill(ctx, x, mask, value):
    v = value.value if isinstance(value, TensorVar) else value
    if isinstance(v, Value) and v.type.dtype != x.value.type.dtype:
        v = ctx.builder.cast(v, dtype=x.value.type.dtype)
    return ctx.builder.where(mask.value, v, x.value)


@entry(torch.clamp, T.clamp, torch.clip, T.clip)
def _clamp(ctx, x, min=None, max=None):
    b = ctx.builder
    dt = result_dtype(x, *(v for v in (min, max) if v is not None))
    out = cast(ctx, x, dt)
    if isinstance(min, TensorVar) or isinstance(max, TensorVar):
        if min is not None:
            out = b.maximum(out, cast(ctx, min, dt))
        if max is not None:
            out = b.minimum(out, cast(ctx, max, dt))
        return out
    return b.clamp(out, min=min, max=max)


# --- reductions -----------------------------------------------------------------------------
def _reduce_builder(op):
    def build(ctx, x, dim=None, keepdim=False, *, dtype=None):
        v = cast(ctx, x, dtype) if dtype is not None else x.value
        return ctx.builder.op(op, v, dims=_dims(dim), keepdim=keepdim)
    return build


for _op, _fns in {"sum": (torch.sum, T.sum), "mean": (torch.mean, T.mean),
                  "prod": (torch.prod, T.prod), "amax": (torch.amax, T.amax),
                  "amin": (torch.amin, T.amin), "any": (torch.any, T.any),
                  "all": (torch.all, T.all)}.items():
    entry(*_fns)(_reduce_builder(_op))


def _var_builder(std):
    def build(ctx, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):  # torch.var(x, unbiased)
            dim, unbiased = None, dim
        corr = correction if correction is not None else (0 if unbiased is False else 1)
        out = ctx.builder.var(x.value, dims=_dims(dim), keepdim=keepdim, correction=int(corr))
        return ctx.builder.sqrt(out) if std else out
    return build


entry(torch.var, T.var)(_var_builder(False))
entry(torch.std, T.std)(_var_builder(True))


def _minmax_builder(reduce_op, arg_op, binary_op):
    def build(ctx, x, dim=None, keepdim=False):
        if isinstance(dim, TensorVar):
            return _binary_builder(binary_op)(ctx, x, dim)
        if dim is None:
            return ctx.builder.op(reduce_op, x.value, dims=[])
        values = ctx.builder.op(reduce_op, x.value, dims=[dim], keepdim=keepdim)
        indices = ctx.builder.op(arg_op, x.value, dim=dim, keepdim=keepdim)
        return (values, indices)
    return build


entry(torch.max, T.max)(_minmax_builder("amax", "argmax", "maximum"))
entry(torch.min, T.min)(_minmax_builder("amin", "argmin", "minimum"))


def _arg_builder(op):
    def build(ctx, x, dim=None, keepdim=False):
        return ctx.builder.op(op, x.value, dim=dim, keepdim=keepdim)
    return build


entry(torch.argmax, T.argmax)(_arg_builder("argmax"))
entry(torch.argmin, T.argmin)(_arg_builder("argmin"))


@entry(torch.softmax, T.softmax, F.softmax)
def _softmax(ctx, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax_like(ctx, "softmax", x, dim, dtype)


@entry(torch.log_softmax, T.log_softmax, F.log_softmax)
def _log_softmax(ctx, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax_like(ctx, "log_softmax", x, dim, dtype)


def _softmax_like(ctx, op, x, dim, dtype):
    if dim is None:
        raise Unsupported("RB013", f"{op} without dim (implicit dim is deprecated)")
    v = cast(ctx, x, dtype) if dtype is not None else x.value
    return ctx.builder.op(op, v, dim=dim)


# --- linear algebra and NN functions ----------------------------------------------------
@entry(torch.matmul, T.matmul, operator.matmul, torch.mm, T.mm, torch.bmm, T.bmm)
def _matmul(ctx, a, b):
    return matmul(ctx, a.value, b.value)


def matmul(ctx, x: Value, y: Value) -> Value:
    B = ctx.builder
    if x.type.rank <= 2 and y.type.rank <= 2:
        return B.matmul(x, y)
    squeeze = None
    if x.type.rank == 1:
        x, squeeze = B.unsqueeze(x, dim=0), -2
    if y.type.rank == 1:
        y, squeeze = B.unsqueeze(y, dim=1), -1
    from ir.ops.rules import broadcast_shapes

    batch = broadcast_shapes(x.type.shape[:-2], y.type.shape[:-2])
    x = B.broadcast_to(x, tuple(batch) + tuple(x.type.shape[-2:]))
    y = B.broadcast_to(y, tuple(batch) + tuple(y.type.shape[-2:]))
    out = B.matmul(x, y)
    if squeeze is not None:
        out = B.squeeze(out, dims=[out.type.rank + squeeze])
    return out


@entry(F.linear)
def _linear(ctx, x, weight, bias=None):
    B = ctx.builder
    v = x.value
    wt = B.transpose(weight.value, 0, 1) if weight.value.type.rank == 2 else weight.value
    if v.type.rank > 2:
        lead = v.type.shape[:-1]
        flat = B.reshape(v, shape=[_prod(lead), v.type.shape[-1]])
        out = B.reshape(B.matmul(flat, wt), shape=list(lead) + [wt.type.shape[-1]])
    else:
        out = B.matmul(v, wt)
    if bias is not None:
        out = B.add(out, bias.value)
    return out


def _prod(dims):
    n = 1
    for d in dims:
        n = n * d
    return n


def _pair2(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


@entry(F.conv2d, torch.conv2d)
def _conv2d(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if isinstance(padding, str):
        if padding != "valid":
            raise Unsupported("RB013", f"conv2d padding={padding!r}")
        padding = 0
    B = ctx.builder
    out = B.conv2d(x.value, weight.value, stride=_pair2(stride), padding=_pair2(padding),
                   dilation=_pair2(dilation), groups=groups)
    if bias is not None:
        out = B.add(out, B.reshape(bias.value, shape=[1, bias.value.type.shape[0], 1, 1]))
    return out


@entry(F.embedding)
def _embedding(ctx, indices, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise Unsupported("RB013", "embedding(max_norm=...) renormalizes the weight in place")
    return ctx.builder.embedding(weight.value, indices.value)


@entry(F.layer_norm)
def _layer_norm(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    B = ctx.builder
    shape = list(normalized_shape)
    like = x.value.type
    w = weight.value if weight is not None else B.op(
        "full", value=1.0, shape=shape, dtype=like.dtype, device=like.device)
    bb = bias.value if bias is not None else B.op(
        "full", value=0.0, shape=shape, dtype=like.dtype, device=like.device)
    return B.layer_norm(x.value, w, bb, normalized_ndim=len(shape), eps=float(eps))


@entry(F.batch_norm)
def _batch_norm(ctx, x, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    if training or running_mean is None:
        raise Unsupported("RB009", "batch_norm with batch statistics (training mode)")
    B = ctx.builder
    like = x.value.type
    c = [like.shape[1]]
    w = weight.value if weight is not None else B.op(
        "full", value=1.0, shape=c, dtype=like.dtype, device=like.device)
    bb = bias.value if bias is not None else B.op(
        "full", value=0.0, shape=c, dtype=like.dtype, device=like.device)
    return B.batch_norm(x.value, running_mean.value, running_var.value, w, bb, eps=float(eps))


@entry(F.dropout, torch.dropout)
def _dropout(ctx, x, p=0.5, training=True, inplace=False):
    if training and p > 0:
        raise Unsupported("RB009", "dropout in training mode draws its own random mask")
    return x


@entry(F.pad)
def _pad(ctx, x, pad, mode="constant", value=None):
    if mode != "constant" or any(p < 0 for p in pad):
        raise Unsupported("RB013", f"pad mode={mode!r} or negative padding")
    return ctx.builder.pad(x.value, pads=list(pad), value=0.0 if value is None else value)


# --- layout ---------------------------------------------------------------------------------
def _sizes(args):
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) \
        else list(args)


@entry(T.reshape, torch.reshape, T.view, view=True, sizes=True)
def _reshape(ctx, x, *args, shape=None):
    if args and isinstance(args[0], torch.dtype):
        raise Unsupported("RB013", "view(dtype) reinterprets bits")
    target = _sizes(args) if shape is None else list(shape)
    if -1 in target:
        known = _prod([d for d in target if not (isinstance(d, int) and d == -1)])
        target = [sympy.simplify(sympy.sympify(_prod(x.value.type.shape)) / known)
                  if isinstance(d, int) and d == -1 else d for d in target]
    return _Shaped("reshape", target)


@entry(T.flatten, torch.flatten, view=True)
def _flatten(ctx, x, start_dim=0, end_dim=-1):
    shape = list(x.value.type.shape)
    if not shape:
        return _Shaped("reshape", [1])
    r = len(shape)
    a, b = start_dim % r, end_dim % r
    return _Shaped("reshape", shape[:a] + [_prod(shape[a:b + 1])] + shape[b + 1:])


@entry(T.unflatten, torch.unflatten, view=True)
def _unflatten(ctx, x, dim, sizes):
    return _Shaped("reshape", None)  # static shapes only: the meta result's


@entry(T.view_as, T.reshape_as, view=True)
def _view_as(ctx, x, other):
    return _Shaped("reshape", list(other.value.type.shape))


@entry(T.expand, torch.broadcast_to, T.broadcast_to, view=True, sizes=True)
def _expand(ctx, x, *args):
    target = _sizes(args)
    lead = len(target) - x.value.type.rank
    return _Shaped("expand", [x.value.type.shape[i - lead] if isinstance(d, int) and d == -1
                              else d for i, d in enumerate(target)])


@entry(T.expand_as, view=True)
def _expand_as(ctx, x, other):
    return _Shaped("expand", list(other.value.type.shape))


def _dim(d):
    """A size as the IR wants it: an int, or a sympy expression with symbols."""
    if isinstance(d, sympy.Basic):
        d = sympy.simplify(d)
        if not d.is_Integer and not d.free_symbols:
            raise Unsupported("RB017", f"size {d} is not an integer")
        return int(d) if d.is_Integer else d
    return d


class _Shaped:
    """A reshape/expand to `shape` (sizes may be symbolic); None: the meta result's."""

    def __init__(self, kind, shape):
        self.kind = kind
        self.shape = shape


def _resolve_shaped(ctx, x: TensorVar, shaped: _Shaped, meta) -> Value:
    if shaped.shape is None:
        if is_symbolic_shape(x.value.type.shape):
            raise Unsupported("RB013", "unflatten of a tensor with a dynamic size")
        shape = list(meta.shape)
    else:
        shape = [_dim(d) for d in shaped.shape]
    if shaped.kind == "reshape":
        return ctx.builder.reshape(x.value, shape=shape)
    return ctx.builder.broadcast_to(x.value, shape)


@entry(T.permute, torch.permute, view=True)
def _permute(ctx, x, *dims):
    perm = list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims)
    return ctx.builder.permute(x.value, perm=[d % max(x.value.type.rank, 1) for d in perm])


@entry(T.transpose, torch.transpose, T.swapaxes, torch.swapaxes, view=True)
def _transpose(ctx, x, d0, d1):
    r = max(x.value.type.rank, 1)
    return ctx.builder.transpose(x.value, d0 % r, d1 % r)


@entry(T.t, torch.t, view=True)
def _t(ctx, x):
    return x.value if x.value.type.rank < 2 else ctx.builder.transpose(x.value, 0, 1)


@entry(T.unsqueeze, torch.unsqueeze, view=True)
def _unsqueeze(ctx, x, dim):
    return ctx.builder.unsqueeze(x.value, dim=dim)


@entry(T.squeeze, torch.squeeze, view=True)
def _squeeze(ctx, x, dim=None):
    return ctx.builder.squeeze(x.value, dims=_dims(dim))


@entry(T.contiguous, view=True)
def _contiguous(ctx, x, memory_format=torch.contiguous_format):
    # torch returns the tensor itself when it is already contiguous, else a copy; the IR
    # has no layouts, so only the aliasing differs (it matters to in-place ops).
    return x if x.meta.is_contiguous() else _Copy()


@entry(T.clone, torch.clone)
def _clone(ctx, x, memory_format=None):
    return _Copy()


class _Copy:
    """A fresh tensor with the operand's value (clone)."""


@entry(T.detach, torch.detach, view=True)
def _detach(ctx, x):
    return _Copy()


def _cast_builder(dtype):
    def build(ctx, x, memory_format=None):
        return _Cast(dtype)
    return build


class _Cast:
    def __init__(self, dtype):
        self.dtype = dtype


for _name, _dt in {"float": torch.float32, "double": torch.float64, "half": torch.float16,
                   "bfloat16": torch.bfloat16, "int": torch.int32, "long": torch.int64,
                   "short": torch.int16, "char": torch.int8, "byte": torch.uint8,
                   "bool": torch.bool}.items():
    entry(getattr(T, _name), view=True)(_cast_builder(_dt))


@entry(T.to, T.type, T.type_as, view=True)
def _to(ctx, x, *args, **kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (str, torch.device)) and ir_device(torch.device(a)) != \
                x.value.type.device:
            raise Unsupported("RB013", f"moving a tensor to {a} inside the graph")
        if isinstance(a, TensorVar) and a.value.type.device != x.value.type.device:
            raise Unsupported("RB013", "moving a tensor to another device inside the graph")
    return _Cast(None)  # the target dtype is read off the meta result


@entry(torch.cat, torch.concat, torch.concatenate)
def _cat(ctx, tensors, dim=0):
    dt = result_dtype(*tensors) if len(tensors) > 1 else tensors[0].meta.dtype
    return ctx.builder.cat([cast(ctx, t, dt) for t in tensors], dim=dim)


@entry(torch.stack)
def _stack(ctx, tensors, dim=0):
    dt = result_dtype(*tensors) if len(tensors) > 1 else tensors[0].meta.dtype
    r = tensors[0].value.type.rank + 1
    d = dim % r
    parts = [ctx.builder.unsqueeze(cast(ctx, t, dt), dim=d) for t in tensors]
    return ctx.builder.cat(parts, dim=d)


# --- creation -------------------------------------------------------------------------------
def _creation_dtype(dtype, default=None):
    return dtype if dtype is not None else (default or torch.get_default_dtype())


def _shape_arg(size):
    if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)):
        return list(size[0])
    return list(size)


def _device(device, like=None) -> str:
    if device is None:
        return like.value.type.device if like is not None else "cpu"
    return ir_device(torch.device(device))


def _full_builder(value):
    def build(ctx, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False, out=None):
        if requires_grad:
            raise Unsupported("RB013", "creating a leaf that requires grad inside the graph")
        shape = [_dim(d) for d in _sizes(size)]
        return _Creation(lambda meta: ctx.builder.op(
            "full", value=value, shape=shape, dtype=ir_dtype(meta.dtype),
            device=_device(device)))
    return build


class _Creation:
    def __init__(self, make):
        self.make = make


entry(torch.zeros, torch.empty, creation=True, sizes=True)(_full_builder(0))
entry(torch.ones, creation=True, sizes=True)(_full_builder(1))


@entry(torch.full, creation=True, sizes=True)
def _full(ctx, size, fill_value, *, dtype=None, device=None, requires_grad=False,
          layout=None, out=None):
    return _full_builder(fill_value)(ctx, size, dtype=dtype, device=device,
                                     requires_grad=requires_grad)


def _like_builder(value):
    def build(ctx, x, *args, dtype=None, device=None, requires_grad=False, layout=None,
              memory_format=None, pin_memory=False):
        fill = args[0] if value is None else value
        return _Creation(lambda meta: ctx.builder.op(
            "full", value=fill, shape=list(x.value.type.shape), dtype=ir_dtype(meta.dtype),
            device=_device(device, x)))
    return build


entry(torch.zeros_like, torch.empty_like)(_like_builder(0))
entry(torch.ones_like)(_like_builder(1))
entry(torch.full_like)(_like_builder(None))


def _random_builder(op, like):
    def build(ctx, *args, dtype=None, device=None, generator=None, requires_grad=False,
              layout=None, pin_memory=False, memory_format=None, out=None):
        if generator is not None:
            raise Unsupported("RB013", f"{op}(generator=...)")
        src = args[0] if like else None
        shape = list(src.value.type.shape) if like else [_dim(d) for d in _sizes(args)]
        return _Creation(lambda meta: ctx.builder.op(
            op, shape=shape, dtype=ir_dtype(meta.dtype), device=_device(device, src)))
    return build


entry(torch.rand, creation=True, sizes=True)(_random_builder("rand", False))
entry(torch.randn, creation=True, sizes=True)(_random_builder("randn", False))
entry(torch.rand_like)(_random_builder("rand", True))
entry(torch.randn_like)(_random_builder("randn", True))


@entry(torch.arange, creation=True)
def _arange(ctx, start, end=None, step=1, *, dtype=None, device=None, requires_grad=False,
            layout=None, out=None):
    if end is None:
        start, end = 0, start
    if not all(isinstance(v, int) for v in (start, end, step)):
        raise Unsupported("RB013", "arange with non-integer bounds")
    return _Creation(lambda meta: ctx.builder.op(
        "arange", start=start, end=end, step=step, dtype=ir_dtype(meta.dtype),
        device=_device(device)))


@entry(torch.tensor, torch.as_tensor, creation=True)
def _tensor(ctx, data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if _tensors(data):
        raise Unsupported("RB013", "torch.tensor() of tensors copies their values")
    return _Creation(lambda meta: ctx.builder.op(
        "constant", data=torch.tensor(data, dtype=meta.dtype).tolist(),
        dtype=ir_dtype(meta.dtype), device=_device(device)))


# --- Python-valued queries (answered from guarded facts) -----------------------------------
for _fn in (T.size, T.dim, T.ndimension, T.numel, T.nelement, torch.numel, T.is_contiguous,
            T.is_floating_point, torch.is_floating_point, T.element_size, T.stride,
            torch.is_tensor, T.is_complex, T.get_device):
    entry(_fn, python=True)(None)


def _needs_value(name):
    def build(ctx, *args, **kwargs):
        raise Unsupported("RB002", f"Tensor.{name}()")
    return build


for _name in ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
              "nonzero", "unique", "masked_select"):
    if hasattr(T, _name):
        entry(getattr(T, _name), host=True)(_needs_value(_name))
for _fn in (torch.nonzero, torch.unique, torch.masked_select):
    entry(_fn, host=True)(_needs_value(_fn.__name__))


# --- attributes, indexing, item assignment --------------------------------------------------
_PLAIN_ATTRS = {"dtype", "shape", "device", "ndim", "is_cuda", "requires_grad", "layout",
                "is_leaf"}


def tensor_attr(ctx, tv: TensorVar, name: str) -> VT:
    from refcomp.tracer.values import MethodVar

    if name == "shape":
        return TupleVar([ConstVar(d) for d in tv.value.type.shape])
    if name in _PLAIN_ATTRS:
        return ConstVar(getattr(tv.meta, name) if name != "device" else _real_device(tv))
    if name == "T" or name == "mT":
        return call_torch(ctx, T.permute if name == "T" else T.transpose,
                          [tv] + ([ConstVar(list(range(tv.meta.dim()))[::-1])] if name == "T"
                                  else [ConstVar(-2), ConstVar(-1)]), {})
    if name in ("data", "grad", "grad_fn", "_version"):
        raise Unsupported("RB005", f"Tensor.{name}")
    method = getattr(T, name, None)
    if method is not None and callable(method):
        return MethodVar(name, tv, name)
    raise Unsupported("RB005", f"Tensor.{name}")


def _real_device(tv):
    dev = tv.value.type.device
    return torch.device(dev if dev != "cpu" else "cpu")


def tensor_getitem(ctx, tv: TensorVar, index: VT) -> VT:
    idx = _unwrap(index)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    for it in items:
        if isinstance(it, TensorVar) and it.meta.dtype == torch.bool:
            raise Unsupported("RB013", "boolean-mask indexing has a data-dependent shape")
        if isinstance(it, list) or (isinstance(it, TensorVar) and it.meta.dim() != 1):
            raise Unsupported("RB013", "advanced indexing beyond one 1-D index tensor")
    if sum(isinstance(it, TensorVar) for it in items) > 1:
        raise Unsupported("RB013", "indexing with several index tensors")
    try:
        meta = tv.meta[_to_meta(idx)]
    except Exception as err:
        raise Unsupported("RB017", f"indexing: {type(err).__name__}: {err}") from None
    value = _basic_index(ctx, tv.value, items)
    _check_type(value, meta, "getitem", ctx)
    operands = [tv] + [it for it in items if isinstance(it, TensorVar)]
    return _new_tensor(ctx, value, meta, operands,
                       view=not any(isinstance(it, TensorVar) for it in items))


def _expand_ellipsis(items, rank):
    consuming = sum(1 for it in items if it is not None and it is not Ellipsis)
    out = []
    for it in items:
        if it is Ellipsis:
            out.extend([slice(None)] * (rank - consuming))
        else:
            out.append(it)
    return out


def _basic_index(ctx, v: Value, items) -> Value:
    B = ctx.builder
    dim = 0
    for it in _expand_ellipsis(items, v.type.rank):
        if it is None:
            v = B.unsqueeze(v, dim=dim)
            dim += 1
        elif isinstance(it, bool):
            raise Unsupported("RB013", "indexing with a Python bool")
        elif it == slice(None):
            dim += 1
        elif not isinstance(v.type.shape[dim], int) and not (isinstance(it, int) and it >= 0):
            raise Unsupported("RB013", f"index {it!r} into a dynamic size")
        elif isinstance(it, int):
            size = v.type.shape[dim]
            i = it + size if it < 0 else it
            v = B.squeeze(B.slice(v, dim=dim, start=i, stop=i + 1), dims=[dim])
        elif isinstance(it, slice):
            start, stop, step = it.indices(v.type.shape[dim])
            if step < 1:
                raise Unsupported("RB013", "negative slice step")
            if (start, stop, step) != (0, v.type.shape[dim], 1):
                v = B.slice(v, dim=dim, start=start, stop=max(stop, start), step=step)
            dim += 1
        elif isinstance(it, TensorVar):
            v = B.index_select(v, it.value, dim=dim)
            dim += 1
        else:
            raise Unsupported("RB013", f"index {it!r}")
    return v


def tensor_setitem(ctx, tv: TensorVar, index: VT, value: VT) -> None:
    """`x[idx] = v` as x' = where(mask, v placed in x's shape, x); x takes x's place."""
    idx = _unwrap(index)
    val = _unwrap(value)
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(isinstance(it, (TensorVar, list, bool)) for it in items):
        raise Unsupported("RB013", "item assignment with tensor or list indices")
    _check_inplace(ctx, tv, "item assignment")
    if is_symbolic_shape(tv.value.type.shape):
        raise Unsupported("RB013", "item assignment into a tensor with a dynamic size")
    meta = tv.meta.detach().clone()
    try:
        meta[idx] = _to_meta(val)
    except Exception as err:
        raise Unsupported("RB017", f"item assignment: {type(err).__name__}: {err}") from None
    B = ctx.builder
    x = tv.value
    shape = list(x.type.shape)
    block_starts, block_sizes = [], []
    dim = 0
    for it in _expand_ellipsis(items, x.type.rank):
        if it is None:
            continue
        size = shape[dim]
        if isinstance(it, int):
            i = it + size if it < 0 else it
            block_starts.append(i)
            block_sizes.append(1)
        else:
            start, stop, step = it.indices(size)
            if step != 1:
                raise Unsupported("RB013", "item assignment into a strided slice")
            block_starts.append(start)
            block_sizes.append(max(stop - start, 0))
        dim += 1
    block_starts += [0] * (len(shape) - dim)
    block_sizes += shape[dim:]
    sub_shape = list(tv.meta[idx].shape)
    if isinstance(val, TensorVar):
        v = cast(ctx, val, tv.meta.dtype)
        v = B.broadcast_to(v, sub_shape)
    else:
        v = B.op("full", value=val, shape=sub_shape, dtype=x.type.dtype, device=x.type.device)
    v = B.reshape(v, shape=block_sizes)
    pads, mask_pads = [], []
    for d in reversed(range(len(shape))):
        pads += [block_starts[d], shape[d] - block_starts[d] - block_sizes[d]]
    mask_pads = pads
    placed = B.pad(v, pads=pads, value=0)
    mask = B.pad(B.op("full", value=True, shape=block_sizes, dtype=ir_dtype(torch.bool),
                      device=x.type.device), pads=mask_pads, value=False)
    _apply_inplace(ctx, tv, B.where(mask, placed, x), meta)


def unbind(ctx, tv: TensorVar) -> list:
    if tv.meta.dim() == 0:
        raise Unsupported("RB017", "iteration over a 0-d tensor")
    n = ctx.specialize(tv.value.type.shape[0])  # unrolling fixes the count (guarded)
    return [tensor_getitem(ctx, tv, ConstVar(i)) for i in range(n)]
