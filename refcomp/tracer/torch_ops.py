"""Torch table entries for computation: pointwise, reductions, NN functions, creation.

Owns: the IR builders of torch's math (registered into `torch_table.TABLE` with
`entry`).  The calling convention, type oracle and result markers live in
refcomp/tracer/torch_table.py.  Spec: spec/tracer.md, "Torch coverage".
"""

from __future__ import annotations

import math
import operator

import sympy
import torch
import torch.nn.functional as F

from ir.graph import Value
from ir.ops.rules import broadcast_shapes
from ir.types import bf16, bool_, f16, f32, f64
from refcomp.reasons import (
    DATA_DEPENDENT_SHAPE,
    INEXPRESSIBLE_OP,
    INPLACE_ON_ALIAS,
    TRACE_EXCEPTION,
    TRAINING_MODE_STATE,
    UNREPLAYABLE_SIDE_EFFECT,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.tracer import dynamic_floats, eager_layout
from refcomp.tracer.context import ir_device, ir_dtype
from refcomp.tracer.torch_table import (
    Creation,
    T,
    TensorVar,
    apply_inplace,
    as_dims,
    cast,
    entry,
    handles,
    ir_size,
    is_symbolic_shape,
    prod_of,
    result_dtype,
    sizes_of,
    tensors_in,
)

# --- pointwise ------------------------------------------------------------------------------
_UNARY = {
    "neg": (torch.neg, T.neg, operator.neg, T.negative, torch.negative),
    "abs": (torch.abs, T.abs),
    "relu": (torch.relu, T.relu),
    "sign": (torch.sign, T.sign),
    "floor": (torch.floor, T.floor), "ceil": (torch.ceil, T.ceil),
    "trunc": (torch.trunc, T.trunc),
    "exp": (torch.exp, T.exp), "log": (torch.log, T.log),
    "log1p": (torch.log1p, T.log1p), "expm1": (torch.expm1, T.expm1),
    "sqrt": (torch.sqrt, T.sqrt), "rsqrt": (torch.rsqrt, T.rsqrt),
    "sin": (torch.sin, T.sin), "cos": (torch.cos, T.cos),
    "tanh": (torch.tanh, T.tanh, F.tanh), "sigmoid": (torch.sigmoid, T.sigmoid, F.sigmoid),
    "erf": (torch.erf, T.erf),
    "reciprocal": (torch.reciprocal, T.reciprocal),
    "logical_not": (torch.logical_not, T.logical_not),
    "isnan": (torch.isnan, T.isnan),
    "bitwise_not": (torch.bitwise_not, T.bitwise_not, operator.invert),
}
# every unary op's in-place method (`x.sin_()`, `torch.exp_(x)`), written by the in-place
# machinery (Note [In-place under grad]); they were opaque calls, whose meta run refuses a
# leaf under grad (RB004)
_INPLACE_UNARY = {op: tuple(f for f in (getattr(torch, op + "_", None), getattr(T, op + "_", None))
                            if f is not None) for op in _UNARY}
_INPLACE_UNARY = {op: fns for op, fns in _INPLACE_UNARY.items() if fns}


def _unary_builder(op):
    def build(ctx, x):
        if op == "abs" and x.meta.dtype == torch.bool:
            # torch's meta kernel accepts it, its CPU kernel raises ("abs_cpu" not
            # implemented for 'Bool'): break so eager raises it (found by the fuzzer).
            raise Unsupported(TRACE_EXCEPTION,
                              "abs of a bool tensor: torch raises NotImplementedError")
        return ctx.builder.op(op, x.value)
    return build


def _unary_inplace_flag(op):
    """F.relu / F.silu (x, inplace=False): inplace=True mutates x (a break)."""
    def build(ctx, x, inplace=False):
        if inplace:
            raise Unsupported(INPLACE_ON_ALIAS, f"{op}(inplace=True)")
        return ctx.builder.op(op, x.value)
    return build


@entry(torch.round, T.round, ir_meta=True, pointwise=True)
def _round(ctx, x, *, decimals=0):
    """round(x, decimals=d) as ATen computes it: round(x * 10^d) / 10^d for d > 0,
    round(x / 10^-d) * 10^-d for d < 0 (half to even)."""
    B = ctx.builder
    if not decimals:
        return B.round(x.value)
    if not x.meta.is_floating_point():
        raise TypeError("round(decimals=...) of an integer tensor")
    ten_pow = 10.0 ** abs(int(decimals))
    if decimals > 0:
        return B.div(B.round(B.mul(x.value, ten_pow)), ten_pow)
    return B.mul(B.round(B.div(x.value, ten_pow)), ten_pow)


# ir_meta: torch's meta kernel is a Python reference (See Note [IR-typed meta]); measured
# on torch 2.13 with a fresh process per op.  sigmoid and silu have C++ meta kernels.
_C_META_UNARY = {"sigmoid", "silu"}
for _op, _fns in _UNARY.items():
    entry(*_fns, ir_meta=_op not in _C_META_UNARY, pointwise=True)(_unary_builder(_op))
for _op, _fns in _INPLACE_UNARY.items():
    entry(*_fns, inplace=True)(_unary_builder(_op))
entry(F.relu, ir_meta=True, pointwise=True)(_unary_inplace_flag("relu"))
entry(F.silu)(_unary_inplace_flag("silu"))


@entry(operator.pos)
def _pos(ctx, x):
    return x


@entry(F.gelu, ir_meta=True, pointwise=True)
def _gelu(ctx, x, approximate="none"):
    return ctx.builder.gelu(x.value, approximate=approximate)


@entry(F.leaky_relu, ir_meta=True, pointwise=True)
def _leaky_relu(ctx, x, negative_slope=0.01, inplace=False):
    if inplace:
        raise Unsupported(INPLACE_ON_ALIAS, "leaky_relu(inplace=True)")
    b = ctx.builder
    out = b.where(b.gt(x.value, 0), x.value, b.mul(x.value, negative_slope))
    ctx.eager_saves.instead[out] = (x.value,)  # LeakyReluBackward saves self (Note [Saved
    # by eager])
    return out


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
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"{op}(out=...)")
        if op == "sub" and any(isinstance(v, bool) or (isinstance(v, TensorVar) and
                                                       v.meta.dtype == torch.bool)
                               for v in (a, b)):
            # torch refuses it; the IR-typed meta shortcut would not notice (eager raises)
            raise Unsupported(TRACE_EXCEPTION, "subtraction with a bool: eager raises RuntimeError")
        if op == "pow" and type(b) is int and b < 0 and isinstance(a, TensorVar) and \
                not (a.meta.dtype.is_floating_point or a.meta.dtype.is_complex):
            # torch checks the Python exponent before computing (a tensor exponent is
            # allowed: 2 ** -1 gives 0 there); eager raises, so the frame runs eagerly.
            raise Unsupported(TRACE_EXCEPTION, "an integer tensor to a negative integer power:"
                              " eager raises RuntimeError")
        if dynamic_floats.has_float_arg((a, b, alpha)):  # Note [Dynamic floats]
            x, y, dt, opmath = dynamic_floats.binary_operands(ctx, op, a, b, alpha,
                                                              rounding_mode)
            out = ctx.builder.op(op, x, y)
            return ctx.builder.cast(out, dtype=ir_dtype(dt)) if opmath else out
        if isinstance(alpha, sympy.Basic):
            alpha = ctx.specialize(alpha)
        # A size as an operand (`x / x.shape[0]`): promoted as the Python int it stands for,
        # then a `size_value` of that dtype (Note [Sizes as tensors] in ir/ops/creation.py).
        dt = result_dtype(*(ctx.concrete(v) if isinstance(v, sympy.Basic) else v
                            for v in (a, b)))
        if isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic):
            if op in _INT_DIVISIONS or rounding_mode is not None or \
                    not isinstance(a, TensorVar) and not isinstance(b, TensorVar):
                a, b = (ctx.specialize(v) if isinstance(v, sympy.Basic) else v for v in (a, b))
            else:
                a, b = (_size_operand(ctx, v, dt, a if v is b else b) for v in (a, b))
        if op in ("add", "sub") and alpha != 1:
            b = ctx.builder.mul(cast(ctx, b, dt), alpha) if isinstance(b, TensorVar) \
                else b * alpha
            b = _AsValue(b) if isinstance(b, Value) else b
        x, y = cast(ctx, a, dt), (b.value if isinstance(b, _AsValue) else cast(ctx, b, dt))
        if (op in _INT_DIVISIONS or rounding_mode is not None) and \
                not dt.is_floating_point and not dt.is_complex:
            _check_nonzero_divisor(ctx, y, x)
        name = op
        if op == "div" and rounding_mode is not None:
            if rounding_mode == "floor":
                name = "div_floor"
            elif rounding_mode == "trunc":
                q = ctx.builder.div(x, y)
                return ctx.builder.cast(ctx.builder.trunc(q), dtype=ir_dtype(dt)) \
                    if not dt.is_floating_point else ctx.builder.trunc(q)
            else:
                raise TypeError(f"rounding_mode {rounding_mode!r}")
        if not isinstance(x, Value) and not isinstance(y, Value):
            raise TypeError("no tensor operand")
        if dt in (torch.float16, torch.bfloat16) and \
                (name == "mul" and any(_inexact_in(v, dt) for v in (x, y)) or
                 name == "div" and isinstance(x, Value) and _inexact_in(y, dt)):
            # Note [Half scalars]: ATen's CPU mul and true division of a half tensor by a
            # Python number (its second operand) compute in float32 with the number as
            # given, rounding the result once (BinaryOpsKernel.cpp's opmath scalar path);
            # rounding the number to half first made 1e5 an inf (0 * 1e5 became NaN) and
            # 0.1 another number.  add and sub round the number to half first, as the IR
            # does (60000 - 70000 is -inf in eager), and `s / x` is reciprocal-then-mul.
            f32 = ir_dtype(torch.float32)
            x, y = (ctx.builder.cast(v, dtype=f32) if isinstance(v, Value) else v
                    for v in (x, y))
            return ctx.builder.cast(ctx.builder.op(name, x, y), dtype=ir_dtype(dt))
        return ctx.builder.op(name, x, y)
    build.float_scalars = True  # a dynamic float operand: Note [Dynamic floats]
    return build


def _inexact_in(v, dtype) -> bool:
    """Whether Python number `v` changes when stored in `dtype` (NaN does not)."""
    if isinstance(v, Value) or isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    stored = torch.tensor(v, dtype=dtype).item()
    return stored != v and not (math.isnan(stored) and math.isnan(v))


_INT_DIVISIONS = ("floor_divide", "remainder", "fmod")


def _size_operand(ctx, v, dt, other):
    """`v` itself, or for a size expression a TensorVar of its `size_value` in dtype `dt`
    (the dtype torch computes in: the int is converted to it, as a Python scalar is)."""
    if not isinstance(v, sympy.Basic):
        return v
    device = other.value.type.device if isinstance(other, TensorVar) else "cpu"
    value = ctx.builder.op("size_value", value=v, dtype=ir_dtype(dt), device=device)
    meta = torch.empty((), dtype=dt, device="meta")
    return TensorVar(value, meta)


def _check_nonzero_divisor(ctx, y, x):
    """Integer division by zero raises RuntimeError("ZeroDivisionError") in eager: a
    constant zero breaks the graph (eager then raises), a tensor divisor adds a runtime
    check the entry raises on (`TraceContext.add_check`); neither where the result has no
    element, since ATen checks each divisor as it computes an element."""
    shape = broadcast_shapes(*(v.type.shape for v in (x, y) if isinstance(v, Value)))
    if not isinstance(y, Value):
        if y == 0 and 0 not in shape:
            raise Unsupported(TRACE_EXCEPTION, "integer division by zero (eager raises"
                                       " ZeroDivisionError)")
        return
    ctx.add_check(ctx.builder.eq(y, 0), "ZeroDivisionError", shape)


class _AsValue:
    def __init__(self, value):
        self.value = value


for _op, _fns in _BINARY.items():
    entry(*_fns, ir_meta=True, sizes=True, pointwise=True)(_binary_builder(_op))
for _op, _fns in _INPLACE_BINARY.items():
    entry(*_fns, inplace=True)(_binary_builder(_op))


@entry(T.__rsub__, ir_meta=True, sizes=True, pointwise=True)
def _rsub(ctx, a, b):
    return _binary_builder("sub")(ctx, b, a)


_rsub.float_scalars = True


@entry(T.__rtruediv__, ir_meta=True, sizes=True, pointwise=True)
def _rdiv(ctx, a, b):
    return _binary_builder("div")(ctx, b, a)


_rdiv.float_scalars = True


@entry(T.__rpow__, ir_meta=True, sizes=True, pointwise=True)
def _rpow(ctx, a, b):
    return _binary_builder("pow")(ctx, b, a)


_rpow.float_scalars = True


@entry(torch.where, T.where, ir_meta=True, pointwise=True)
def _where(ctx, cond, a=None, b=None):
    if a is None:
        raise Unsupported(DATA_DEPENDENT_SHAPE, "torch.where(cond) has a data-dependent shape")
    dt = result_dtype(a, b)
    c = cond.value if isinstance(cond, TensorVar) else cond
    return ctx.builder.where(c, cast(ctx, a, dt), cast(ctx, b, dt))


@entry(T.masked_fill, ir_meta=True)
def _masked_fill(ctx, x, mask, value):
    """Row-major whatever `x`'s layout: ATen's out-of-place masked_fill clones the
    (broadcast) input with MemoryFormat::Contiguous, then fills in place (corpus
    masked_fill_channels_last_batch1_strides)."""
    v = value.value if isinstance(value, TensorVar) else value
    if isinstance(v, Value) and v.type.dtype != x.value.type.dtype:
        v = ctx.builder.cast(v, dtype=x.value.type.dtype)
    return ctx.builder.where(mask.value, v, x.value)


@entry(T.masked_fill_, inplace=True)
def _masked_fill_(ctx, x, mask, value):
    """`x.masked_fill_(mask, value)`: x's new value is `where(mask, value, x)`, written by
    the in-place machinery (cast to x's dtype; under grad, Note [In-place under grad])."""
    return _masked_fill(ctx, x, mask, value)


@entry(T.fill_, inplace=True)
def _fill_(ctx, x, value):
    """`x.fill_(value)`: x's new value is `value` everywhere (a 0-d tensor broadcast, so
    its gradient is the sum of x's; a number as `full_like`)."""
    if isinstance(value, TensorVar):
        return ctx.builder.broadcast_to(value.value, list(x.value.type.shape))
    return ctx.builder.op("full", value=value, shape=list(x.value.type.shape),
                          dtype=x.value.type.dtype, device=x.value.type.device)


@entry(T.zero_, inplace=True)
def _zero_(ctx, x):
    return _fill_(ctx, x, 0)


def _row_index(ctx, x, dim, index, name):
    """`index` (an int64 tensor of rank <= 1 naming rows of x along dim, negative from the
    end) as an IR value of rank 1, wrapped; out-of-bounds raises IndexError after the graph
    as eager's does (a runtime check)."""
    from refcomp.tracer.tensor_layout import _check_index_bounds

    if not isinstance(index, TensorVar) or index.meta.dtype != torch.int64 or \
            index.meta.dim() > 1 or is_symbolic_shape(x.value.type.shape) or \
            is_symbolic_shape(index.value.type.shape):
        raise Unsupported(INEXPRESSIBLE_OP, f"{name} with this index")
    B = ctx.builder
    i = index.value if index.meta.dim() == 1 else B.reshape(index.value, shape=[1])
    _check_index_bounds(ctx, i, x.value, dim)
    n = x.value.type.shape[dim]
    # clamped into range: the graph's index ops run before the check raises
    return B.clamp(B.where(B.lt(i, 0), B.add(i, n), i), min=0, max=max(n - 1, 0))


def _rows_hit(ctx, x, dim, i):
    """bool of x's shape: the rows along dim that rank-1 index `i` names."""
    B = ctx.builder
    shape = list(x.value.type.shape)
    n, m = shape[dim], int(i.type.shape[0])
    i64 = ir_dtype(torch.int64)
    device = x.value.type.device
    hits = B.index_add(B.full(value=0, shape=[n], dtype=i64, device=device), i,
                       B.full(value=1, shape=[m], dtype=i64, device=device), dim=0)
    hit = B.reshape(B.gt(hits, 0), shape=[n if d == dim else 1 for d in range(len(shape))])
    return B.broadcast_to(hit, shape)


@entry(T.index_fill_, inplace=True)
def _index_fill_(ctx, x, dim, index, value):
    """`x.index_fill_(dim, index, value)`: where(the rows index names, value, x); a
    repeated index names its row once (eager's gradient of a tensor value sums over the
    unique rows)."""
    if x.meta.dim() == 0 or not isinstance(dim, int):
        raise Unsupported(INEXPRESSIBLE_OP, "index_fill_ of a 0-d tensor")
    d = dim % x.meta.dim()
    if isinstance(value, TensorVar) and ctx.grad_enabled and value.requires_grad:
        # eager's backward of the value index_selects the unique indices unwrapped: a
        # negative one raises IndexError there, which the graph's gradient would not
        raise Unsupported(INEXPRESSIBLE_OP, "index_fill_ with a value that requires grad")
    if any(isinstance(n, int) and n == 0 for n in x.value.type.shape):
        # eager's checks of an empty tensor depend on which dim is empty (none, or a
        # RuntimeError from setStorage): it runs them (corpus index_fill_of_empty_input)
        raise Unsupported(INEXPRESSIBLE_OP, "index_fill_ of a tensor with no elements")
    i = _row_index(ctx, x, d, index, "index_fill_")
    v = value.value if isinstance(value, TensorVar) else value
    if isinstance(v, Value):
        if v.type.rank:
            raise Unsupported(INEXPRESSIBLE_OP, "index_fill_ with a value of rank > 0")
        v = cast(ctx, value, x.meta.dtype)
    return ctx.builder.where(_rows_hit(ctx, x, d, i), v, x.value)


@entry(T.index_put_, torch.index_put_, inplace=True)
def _index_put_(ctx, x, indices, values, accumulate=False):
    """`x.index_put_((index,), values, accumulate)` with one int64 index of rank 1 (rows
    of dim 0): accumulate adds each value row to its row (`index_add`, eager's gradients:
    x's passes through, the values' is the gradient's rows); otherwise each named row
    takes the value row of the *last* index naming it, as ATen's CPU kernel writes them in
    order below its parallel grain (torch calls repeated indices undefined): a comparison
    of every index with every row picks it.  Without accumulate, values that require grad
    break: eager gives every repeated index's value row the gradient of its row, which the
    last-one pick cannot say."""
    B = ctx.builder
    indices = list(indices) if isinstance(indices, (list, tuple)) else [indices]
    if len(indices) != 1 or not isinstance(values, TensorVar) or x.meta.dim() == 0:
        raise Unsupported(INEXPRESSIBLE_OP, "index_put_ other than one index tensor and a"
                                            " tensor of values")
    i = _row_index(ctx, x, 0, indices[0], "index_put_")
    shape = list(x.value.type.shape)
    if shape[0] == 0:  # (a non-empty index raises after the graph)
        return x.value
    m = int(i.type.shape[0])
    v = B.broadcast_to(cast(ctx, values, x.meta.dtype), [m] + shape[1:])
    if accumulate:
        return B.index_add(x.value, i, v, dim=0)
    if ctx.grad_enabled and values.requires_grad:
        raise Unsupported(INEXPRESSIBLE_OP, "index_put_ (no accumulate) of values that"
                                            " require grad: eager's gradient of repeated"
                                            " indices' values")
    if m == 0:
        return x.value
    i64 = ir_dtype(torch.int64)
    device = x.value.type.device
    rows = B.reshape(B.arange(end=shape[0], dtype=i64, device=device), shape=[1, shape[0]])
    named = B.eq(B.reshape(i, shape=[m, 1]), rows)  # [m, n]: index j names row r
    order = B.reshape(B.arange(end=m, dtype=i64, device=device), shape=[m, 1])
    last = B.amax(B.where(named, order, -1), dims=[0], keepdim=False)  # [n], -1: unnamed
    picked = B.index_select(v, B.clamp(last, min=0), dim=0)
    hit = B.broadcast_to(B.reshape(B.ge(last, 0), shape=[shape[0]] + [1] * (len(shape) - 1)),
                         shape)
    return B.where(hit, picked, x.value)


@entry(torch.clamp, T.clamp, torch.clip, T.clip, ir_meta=True, pointwise=True)
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
        dims = as_dims(dim)
        if op in ("amax", "amin") and not dims:
            # `torch.amax(x)` names every dim: amax's backward multiplies its share by
            # the mask, where `dims=()` is x.max()'s, which leaves the others exactly 0
            # (a NaN gradient: corpus grad_amax_without_dim_nan_gradient)
            dims = list(range(v.type.rank))
        return ctx.builder.op(op, v, dims=dims, keepdim=keepdim)
    return build


for _op, _fns in {"sum": (torch.sum, T.sum), "mean": (torch.mean, T.mean),
                  "prod": (torch.prod, T.prod), "amax": (torch.amax, T.amax),
                  "amin": (torch.amin, T.amin), "any": (torch.any, T.any),
                  "all": (torch.all, T.all)}.items():
    entry(*_fns, ir_meta=_op == "mean")(_reduce_builder(_op))


def _root_masked_at_zero(B, s, root):
    """root(s) whose gradient is 0 where s is 0, as ATen's std and norm backwards mask it
    (`masked_fill_(norm == 0, 0)`), where the root's own VJP is inf there (inf * 0 = NaN
    through the sum of squares): the root reads 1 there and the result is 0 * s."""
    zero = B.eq(s, 0.0)
    return B.where(zero, B.mul(s, 0.0), root(B.where(zero, 1.0, s)))


def _var_builder(std):
    def build(ctx, x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):  # torch.var(x, unbiased)
            dim, unbiased = None, dim
        corr = correction if correction is not None else (0 if unbiased is False else 1)
        B, v = ctx.builder, x.value
        sqrt = B.sqrt
        if std and ctx.grad_enabled and x.requires_grad:
            # ATen's std backward is 0 where std is 0 (corpus grad_std_of_constant).
            def sqrt(out):
                return _root_masked_at_zero(B, out, B.sqrt)
        if std and v.type.dtype in (f16, bf16):
            # ATen's std of a half tensor is sqrt of the float32 variance, rounded once;
            # rounding the variance to half first put the result an ulp off (thorough
            # profile, corpus half_std_rounded_once)
            out = sqrt(B.var(B.cast(v, dtype=f32), dims=as_dims(dim), keepdim=keepdim,
                             correction=int(corr)))
            return B.cast(out, dtype=v.type.dtype)
        out = B.var(v, dims=as_dims(dim), keepdim=keepdim, correction=int(corr))
        if not std:
            return out
        out = sqrt(out)
        ctx.eager_saves.instead[out] = (v, out)  # StdBackward saves self and result
        return out
    return build


entry(torch.var, T.var)(_var_builder(False))
entry(torch.std, T.std, ir_meta=True)(_var_builder(True))


def _minmax_builder(reduce_op, arg_op, binary_op):
    def build(ctx, x, dim=None, keepdim=False):
        if isinstance(dim, TensorVar):
            return _binary_builder(binary_op)(ctx, x, dim)
        # torch's meta kernels of max/min accept an empty reduction that eager refuses:
        # eager raises it (a size-0 dim is always static), even when the result is dead.
        name = reduce_op[1:]
        if dim is None and 0 in x.meta.shape:
            raise Unsupported(TRACE_EXCEPTION, f"{name}(): RuntimeError: Expected reduction dim to"
                                       " be specified for input.numel() == 0")
        if dim is None:
            return ctx.builder.op(reduce_op, x.value, dims=[])
        if x.meta.dim() and x.meta.shape[dim] == 0:
            raise Unsupported(TRACE_EXCEPTION, f"{name}(): IndexError: Expected reduction dim {dim}"
                                       " to have non-zero size")
        indices = ctx.builder.op(arg_op, x.value, dim=dim, keepdim=keepdim)
        if ctx.grad_enabled and x.requires_grad:
            # Eager's max(dim)/min(dim) backward gives each result's whole gradient to the
            # element at its returned index (value_selecting_reduction_backward), where
            # amax/amin share it among ties, and saves the indices, not the values (which
            # the caller may then modify in place): the values are gathered at the indices
            # (corpus grad_max_dim_ties, grad_min_dim_values_modified_in_place).
            if not x.meta.dim():
                values = ctx.builder.mul(x.value, 1.0)  # its only element
                # Eager's MaxBackward/MinBackward saves the indices here too (Note [Saved
                # by eager]: corpus grad_max_dim_of_0d_indices_modified).
                ctx.eager_saves.instead[values] = (indices,)
                return (values, indices)
            d = dim % x.meta.dim()
            idx = indices if keepdim else ctx.builder.op("unsqueeze", indices, dim=d)
            values = ctx.builder.op("gather", x.value, idx, dim=d)
            # MaxBackward/MinBackward saves the indices, where gather's node saves its
            # input too (Note [Saved by eager]: x modified in place after the graph
            # does not raise at backward; corpus grad_max_dim_input_modified_false_raise).
            ctx.eager_saves.instead[values] = (indices,)
            if not keepdim:
                values = ctx.builder.op("squeeze", values, dims=[d])
            return (values, indices)
        values = ctx.builder.op(reduce_op, x.value, dims=[dim], keepdim=keepdim)
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


# torch.softmax(x, dim, dtype) and F.softmax(x, dim, _stacklevel, dtype) place dtype
# differently: one builder each, so a positional dtype is never read as a stack level.
@entry(torch.softmax, T.softmax)
def _softmax(ctx, x, dim, dtype=None):
    return _softmax_like(ctx, "softmax", x, dim, dtype)


@entry(F.softmax)
def _f_softmax(ctx, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax_like(ctx, "softmax", x, dim, dtype)


@entry(torch.log_softmax, T.log_softmax, ir_meta=True)
def _log_softmax(ctx, x, dim, dtype=None):
    return _softmax_like(ctx, "log_softmax", x, dim, dtype)


@entry(F.log_softmax, ir_meta=True)
def _f_log_softmax(ctx, x, dim=None, _stacklevel=3, dtype=None):
    return _softmax_like(ctx, "log_softmax", x, dim, dtype)


def _softmax_like(ctx, op, x, dim, dtype):
    if dim is None:
        raise Unsupported(INEXPRESSIBLE_OP, f"{op} without dim (implicit dim is deprecated)")
    v = cast(ctx, x, dtype) if dtype is not None else x.value
    return ctx.builder.op(op, v, dim=dim)


# --- linear algebra and NN functions ----------------------------------------------------
@entry(torch.matmul, T.matmul, operator.matmul, torch.mm, T.mm, torch.bmm, T.bmm,
       torch.mv, T.mv, torch.dot, T.dot, torch.vdot, T.vdot)  # (vdot: real operands only)
def _matmul(ctx, a, b):
    return matmul(ctx, a.value, b.value)


def matmul(ctx, x: Value, y: Value) -> Value:
    B = ctx.builder
    if x.type.rank <= 2 and y.type.rank <= 2:
        return B.matmul(x, y)
    if y.type.rank <= 2:
        # [..., m, k] @ [k, n]: fold the batch into the rows, one 2-d matmul, as
        # torch.matmul does.  Broadcasting y over the batch instead gives a batched
        # matmul of an expanded operand, whose gradient is a batched product summed
        # over the batch: 8x the scratch and a GEMM with a short contraction.
        lead = list(x.type.shape[:-1])
        flat = B.reshape(x, shape=[prod_of(lead), x.type.shape[-1]])
        y2 = B.unsqueeze(y, dim=1) if y.type.rank == 1 else y
        out = B.matmul(flat, y2)
        return B.reshape(out, shape=lead + list(y.type.shape[1:]))
    squeeze = None
    if x.type.rank == 1:
        x, squeeze = B.unsqueeze(x, dim=0), -2
    if y.type.rank == 1:
        y, squeeze = B.unsqueeze(y, dim=1), -1

    batch = broadcast_shapes(x.type.shape[:-2], y.type.shape[:-2])
    x = B.broadcast_to(x, tuple(batch) + tuple(x.type.shape[-2:]))
    y = B.broadcast_to(y, tuple(batch) + tuple(y.type.shape[-2:]))
    out = B.matmul(x, y)
    if squeeze is not None:
        out = B.squeeze(out, dims=[out.type.rank + squeeze])
    return out


# Note [Linear's one rounding]: ATen's linear with a bias takes a fused path (addmm of the
# flattened input: the products and the bias are summed in float, then rounded once) for a
# 2-d input, or a contiguous one of rank 3 or with a 1-d bias; otherwise it runs matmul
# (rounded) then adds the bias (rounded again).  In float16/bfloat16 the two differ by an
# ulp of the result (corpus linear_bf16_bias_rounds_once), so where eager fuses, refcomp
# computes a half-precision linear in float32 and rounds once.
def _fuses_bias(x, weight, bias) -> bool:
    if bias is None or weight.value.type.rank != 2 or x.value.type.dtype not in (f16, bf16):
        return False
    rank = x.value.type.rank
    return rank == 2 or (x.meta.is_contiguous() and (rank == 3 or bias.value.type.rank == 1))


@entry(F.linear, ir_meta=True)
def _linear(ctx, x, weight, bias=None):
    B = ctx.builder
    v, w = x.value, weight.value
    b = bias.value if bias is not None else None
    dtype = v.type.dtype
    for p in (weight, bias):
        # ATen's linear promotes nothing (mm and addmm check their operands' dtypes); the
        # IR's matmul and add would.  Eager raises at the break.
        if p is not None and p.meta.dtype != x.meta.dtype:
            raise Unsupported(TRACE_EXCEPTION, f"F.linear: RuntimeError: expected {x.meta.dtype}"
                                       f" operands, found {p.meta.dtype}")
    fused = _fuses_bias(x, weight, bias)
    if fused:
        v, w, b = (B.cast(t, dtype=f32) for t in (v, w, b))
    wt = B.transpose(w, 0, 1) if w.type.rank == 2 else w
    if v.type.rank > 2:
        lead = v.type.shape[:-1]
        flat = B.reshape(v, shape=[prod_of(lead), v.type.shape[-1]])
        out = B.reshape(B.matmul(flat, wt), shape=list(lead) + [wt.type.shape[-1]])
    else:
        out = B.matmul(v, wt)
    if b is not None:
        out = B.add(out, b)
    return B.cast(out, dtype=dtype) if fused else out


def _pair2(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _conv2d_layout(meta, x, weight, *args, **kwargs):
    """ATen's CPU conv2d: channels_last when the input or weight suggests it
    (eager_layout.conv_strides); the meta kernel says row-major."""
    return eager_layout.conv_strides(x.meta, weight.meta, meta.shape)


@entry(F.conv2d, torch.conv2d, layout=_conv2d_layout)
def _conv2d(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if isinstance(padding, str):
        if padding != "valid":
            raise Unsupported(INEXPRESSIBLE_OP, f"conv2d padding={padding!r}")
        padding = 0
    B = ctx.builder
    out = B.conv2d(x.value, weight.value, stride=_pair2(stride), padding=_pair2(padding),
                   dilation=_pair2(dilation), groups=groups)
    if bias is not None:
        out = B.add(out, B.reshape(bias.value, shape=[1, bias.value.type.shape[0], 1, 1]))
    return out


# --- pooling --------------------------------------------------------------------------------
def _pool2d(ctx, op, x, attrs):
    """An NCHW pooling extern; a CHW input is pooled as a batch of one."""
    B = ctx.builder
    v = x.value
    if v.type.rank == 3:
        return B.squeeze(B.op(op, B.unsqueeze(v, dim=0), **attrs), dims=[0])
    return B.op(op, v, **attrs)


@entry(F.max_pool2d, F.max_pool2d_with_indices, torch.max_pool2d)
def _max_pool2d(ctx, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    if return_indices:
        raise Unsupported(INEXPRESSIBLE_OP, "max_pool2d(return_indices=True): the IR has no argmax"
                                   " windows")
    stride = kernel_size if stride is None or stride == [] else stride
    return _pool2d(ctx, "max_pool2d", x, {
        "kernel_size": _pair2(kernel_size), "stride": _pair2(stride),
        "padding": _pair2(padding), "dilation": _pair2(dilation), "ceil_mode": bool(ceil_mode)})


@entry(F.avg_pool2d)
def _avg_pool2d(ctx, x, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    if divisor_override is not None:
        raise Unsupported(INEXPRESSIBLE_OP, "avg_pool2d(divisor_override=...)")
    stride = kernel_size if stride is None or stride == [] else stride
    return _pool2d(ctx, "avg_pool2d", x, {
        "kernel_size": _pair2(kernel_size), "stride": _pair2(stride),
        "padding": _pair2(padding), "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad)})


@entry(F.adaptive_avg_pool2d, ir_meta=True, channels_last=True)
def _adaptive_avg_pool2d(ctx, x, output_size):
    """Output 1x1: a mean over H, W (keepdim).  An output size dividing the input size:
    avg_pool2d with kernel = stride = input // output (torch's adaptive windows
    [floor(i H / oh), ceil((i + 1) H / oh)) are then exactly those).  Else RB013."""
    hw = list(x.value.type.shape[-2:])
    want = [hw[i] if o is None else o for i, o in enumerate(_pair2(output_size))]
    if want == [1, 1]:
        return ctx.builder.mean(x.value, dims=[-2, -1], keepdim=True)
    if any(not isinstance(h, int) or o < 1 or h % o for h, o in zip(hw, want)):
        raise Unsupported(INEXPRESSIBLE_OP, f"adaptive_avg_pool2d from {hw} to {want}: only output"
                                   " sizes that divide the input size are captured")
    if any(d == 0 for d in x.value.type.shape[-3:-2]):
        # ATen's avg_pool2d refuses an input with no channels, its adaptive_avg_pool2d
        # does not (corpus adaptive_avg_pool_of_empty_channels_crash): eager runs it.
        raise Unsupported(INEXPRESSIBLE_OP, "adaptive_avg_pool2d of an input with no channels")
    k = [h // o for h, o in zip(hw, want)]
    return _pool2d(ctx, "avg_pool2d", x, {"kernel_size": k, "stride": k})


# --- norms ----------------------------------------------------------------------------------
def vector_norm(ctx, v: Value, p, dims, keepdim, x=None) -> Value:
    """sum(|x|^p)^(1/p) over dims: p=2 as sqrt(sum(x*x)), p=1 as sum(|x|), p=inf as
    amax(|x|).  Other p (0, -inf, 'nuc', negative) break the graph (RB013).  An f16/bf16
    x is reduced in f32 and the norm rounded once, as ATen does: in f16 the squares of
    64 values near 100 sum past 65504 to inf (corpus half_vector_norm_overflow).  `x`: the
    traced tensor v is read from; where it requires grad, the root's gradient is masked
    where the norm is 0, as ATen's norm_backward masks it (corpus grad_norm_of_zeros)."""
    B = ctx.builder
    if v.type.dtype in (f16, bf16):
        return B.cast(vector_norm(ctx, B.cast(v, dtype=f32), p, dims, keepdim, x),
                      dtype=v.type.dtype)
    masked = x is not None and x.requires_grad and ctx.grad_enabled
    if p == "fro" or p == 2:
        sq = B.sum(B.mul(v, v), dims=dims, keepdim=keepdim)
        out = _root_masked_at_zero(B, sq, B.sqrt) if masked else B.sqrt(sq)
    elif p == 1:
        out = B.sum(B.abs(v), dims=dims, keepdim=keepdim)
    elif p == float("inf"):
        out = B.amax(B.abs(v), dims=dims, keepdim=keepdim)
    elif isinstance(p, (int, float)) and 0 < p < float("inf"):
        if masked and p < 1:
            # ATen also masks |x|^(p-1) where x is 0; the pow VJP there is inf * sign 0.
            raise Unsupported(INEXPRESSIBLE_OP, f"the gradient of a norm with p={p!r} < 1")
        s = B.sum(B.pow(B.abs(v), float(p)), dims=dims, keepdim=keepdim)

        def root(t):
            return B.pow(t, 1.0 / p)
        out = _root_masked_at_zero(B, s, root) if masked else root(s)
    else:
        raise Unsupported(INEXPRESSIBLE_OP, f"norm with p={p!r}")
    ctx.eager_saves.instead[out] = (v, out)  # eager's norm backward saves self and result
    return out


def _norm_input(ctx, x, dtype):
    return cast(ctx, x, dtype) if dtype is not None else x.value


@entry(torch.norm, T.norm, ir_meta=True)
def _norm(ctx, x, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    if out is not None:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "norm(out=...)")
    if p is None:
        p = "fro"
    return vector_norm(ctx, _norm_input(ctx, x, dtype), p, as_dims(dim), keepdim, x)


@entry(torch.linalg.vector_norm, ir_meta=True)
def _vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if out is not None:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "vector_norm(out=...)")
    return vector_norm(ctx, _norm_input(ctx, x, dtype), ord, as_dims(dim), keepdim, x)


@entry(F.normalize, ir_meta=True, pointwise=True)
def _normalize(ctx, x, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(norm(x, p, dim, keepdim=True), eps), as torch writes it; the division is
    TensorIterator's, so the result keeps x's memory order (`pointwise`)."""
    if out is not None:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "normalize(out=...)")
    B = ctx.builder
    denom = B.clamp(vector_norm(ctx, x.value, p, as_dims(dim), True, x), min=eps)
    return B.div(x.value, denom)


@entry(F.embedding)
def _embedding(ctx, indices, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise Unsupported(INEXPRESSIBLE_OP,
                          "embedding(max_norm=...) renormalizes the weight in place")
    if scale_grad_by_freq or sparse:  # gradients the IR's VJP does not make
        raise Unsupported(INEXPRESSIBLE_OP, "embedding(scale_grad_by_freq=True or sparse=True)")
    if padding_idx is not None and padding_idx < 0:  # F.embedding's normalization
        padding_idx += weight.meta.shape[0]
    return ctx.builder.embedding(weight.value, indices.value, padding_idx=padding_idx)


def _check_cpu_norm_dtypes(name, x, *params):
    """ATen's CPU norm kernels (batch_norm_cpu, layer_norm_cpu; `is_mixed_type` and
    `check_mixed_data_type` in ATen's mixed_type.h) refuse parameters of another dtype
    than the input's, unless the input is float32, float16 or bfloat16 and every
    parameter is float32; where the first parameter has the input's dtype, every one
    must.  The IR would compute them in promoted arithmetic, so the check
    is made here: eager then raises at the break (soak seed 8001: `F.batch_norm` of a
    float64 input with float32 running statistics ran)."""
    given = [p for p in params if p is not None]
    if not given or x.value.type.device != "cpu":
        return
    if given[0].meta.dtype == x.meta.dtype:  # not mixed: every parameter is read so
        for p in given:
            if p.meta.dtype != x.meta.dtype:
                raise Unsupported(TRACE_EXCEPTION, f"{name}: RuntimeError: expected scalar type"
                                           f" {x.meta.dtype} but found {p.meta.dtype}")
        return
    if x.meta.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise Unsupported(TRACE_EXCEPTION,
                          f"{name}: RuntimeError: mixed dtype (CPU): all inputs must"
                                   " share same datatype.")
    if any(p.meta.dtype != torch.float32 for p in given):
        raise Unsupported(TRACE_EXCEPTION,
                          f"{name}: RuntimeError: mixed dtype (CPU): expect parameter"
                                   " to have scalar type of Float")


@entry(F.layer_norm, ir_meta=True)
def _layer_norm(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    _check_cpu_norm_dtypes("layer_norm", x, weight, bias)
    B = ctx.builder
    shape = list(normalized_shape)
    like = x.value.type
    w = weight.value if weight is not None else B.op(
        "full", value=1.0, shape=shape, dtype=like.dtype, device=like.device)
    bb = bias.value if bias is not None else B.op(
        "full", value=0.0, shape=shape, dtype=like.dtype, device=like.device)
    return B.layer_norm(x.value, w, bb, normalized_ndim=len(shape), eps=float(eps))


def _batch_norm_layout(meta, x, running_mean, running_var, weight=None, bias=None, *args,
                       **kwargs):
    """F.batch_norm runs ATen's batch_norm_cpu (eager_layout.batch_norm_strides)."""
    return eager_layout.batch_norm_strides(
        x.meta, *(t.meta if isinstance(t, TensorVar) else None for t in (weight, bias)))


@entry(F.batch_norm, ir_meta=True, layout=_batch_norm_layout)
def _batch_norm(ctx, x, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    _check_cpu_norm_dtypes("batch_norm", x, weight, bias, running_mean, running_var)
    B = ctx.builder
    like = x.value.type
    if len(like.shape) < 2:  # no channel dim: ATen's kernel (an opaque node) decides
        raise Unsupported(INEXPRESSIBLE_OP, f"batch_norm of a {len(like.shape)}-d input (no channel"
                                   " dim)")
    c = [like.shape[1]]
    w = weight.value if weight is not None else B.op(
        "full", value=1.0, shape=c, dtype=like.dtype, device=like.device)
    bb = bias.value if bias is not None else B.op(
        "full", value=0.0, shape=c, dtype=like.dtype, device=like.device)
    if training:
        mean, var = _batch_stats(ctx, x, running_mean, running_var, momentum)
        return B.batch_norm(x.value, mean, var, w, bb, eps=float(eps))
    if running_mean is None:
        raise Unsupported(TRAINING_MODE_STATE, "batch_norm without running statistics in eval mode")
    return B.batch_norm(x.value, running_mean.value, running_var.value, w, bb, eps=float(eps))


class CumulativeAverage:
    """BatchNorm's `momentum=None` (a module in training mode only): the running
    statistics are the average over every batch seen, factor 1 / num_batches_tracked.
    `count` is the IR value of num_batches_tracked after this call's increment, so the
    factor is computed in the graph, never read as a Python number (it changes on every
    call).  Eager computes `1.0 / float(count)` in double and ATen casts it to the
    buffers' dtype; `_batch_stats` does the same."""

    def __init__(self, count: Value):
        self.count = count


def _batch_stats(ctx, x, running_mean, running_var, momentum):
    """Training-mode batch norm: the batch's mean and biased variance per channel (dim 1),
    and, as eager's kernel does, running = (1 - momentum) * running + momentum * stat with
    the unbiased variance, written back to the buffers after the graph (a mutation of a
    graph input that does not require grad).  The normalization is the batch_norm
    composite over these statistics, so its VJP (through mean and var) is training
    batch norm's gradient; the write-back carries no gradient (spec/autograd.md)."""
    B = ctx.builder
    shape = x.value.type.shape
    dims = [0] + list(range(2, len(shape)))
    n = 1
    for d in dims:
        n = n * shape[d]
    if not isinstance(n, int):
        raise Unsupported(TRAINING_MODE_STATE, "training-mode batch_norm with a dynamic batch size")
    if n <= 1:  # eager raises ValueError("Expected more than 1 value per channel ...")
        raise Unsupported(TRAINING_MODE_STATE,
                          "training-mode batch_norm over one value per channel")
    mean = B.mean(x.value, dims=dims)
    var = B.var(x.value, dims=dims, correction=0)
    if running_mean is not None:
        if momentum is None:
            raise Unsupported(TRAINING_MODE_STATE, "batch_norm momentum=None (cumulative average)")
        # The unbiased variance as ATen computes it (sum of squares / (n - 1)): one rounding.
        unbiased = B.var(x.value, dims=dims, correction=1)
        for buf, stat in ((running_mean, mean), (running_var, unbiased)):
            if buf.requires_grad:
                raise Unsupported(INPLACE_ON_ALIAS,
                                  "batch_norm running statistics that require grad")
            t = buf.value.type
            m, keep = _momentum(B, momentum, t)
            new = B.add(B.mul(buf.value, keep), B.mul(B.cast(stat, dtype=t.dtype)
                                                      if stat.type.dtype != t.dtype
                                                      else stat, m))
            ctx.grad_free.add(new)
            apply_inplace(ctx, buf, new, buf.meta)
    return mean, var


def _momentum(B, momentum, t):
    """(momentum, 1 - momentum) for a running-statistics buffer of type t: Python
    numbers, or for a CumulativeAverage rank-0 values of t's dtype."""
    if not isinstance(momentum, CumulativeAverage):
        return float(momentum), 1.0 - float(momentum)
    one = B.op("full", value=1.0, shape=[], dtype=f64, device=t.device)
    factor = B.cast(B.div(one, B.cast(momentum.count, dtype=f64)), dtype=t.dtype)
    one = B.op("full", value=1.0, shape=[], dtype=t.dtype, device=t.device)
    return factor, B.sub(one, factor)


@entry(F.dropout, torch.dropout)
@handles(from_meta=("inplace",))
def _dropout(ctx, x, p=0.5, training=True, inplace=False):
    if not training or p == 0 or 0 in x.value.type.shape:
        # the identity, the very tensor whether `inplace` or not (as in eager); ATen's
        # dropout returns an input with no element itself too (`_dropout_impl`; a 0 size
        # is never symbolic: corpus dropout_of_empty_input_is_the_input)
        return x
    if inplace:
        raise Unsupported(INPLACE_ON_ALIAS, "dropout(inplace=True) in training mode")
    B = ctx.builder
    t = x.value.type
    if not t.dtype.is_float or not 0 < p <= 1:
        raise Unsupported(TRAINING_MODE_STATE, f"dropout in training mode with p={p} on {t.dtype}")
    if p == 1:  # ATen multiplies by zeros and draws nothing
        return B.mul(x.value, 0.0)
    # The mask is drawn as ATen's CPU dropout draws it (codegen/eager.py), from torch's
    # generator at this point of the program: the same stream as eager (spec/autograd.md).
    if t.device != "cpu":
        raise Unsupported(TRAINING_MODE_STATE,
                          "dropout in training mode off the CPU (eager fuses the"
                                   " draw into native_dropout there)")
    # ... on `empty_like(x)`: x's layout when x is dense (Note [Random draws in eager's
    # layout], refcomp/tracer/eager_layout.py)
    order = eager_layout.memory_order(torch.empty_like(x.meta))
    mask = B.dropout_mask(shape=list(t.shape), p=float(p), dtype=t.dtype, device=t.device,
                          order=order)
    return B.mul(x.value, mask)


@entry(F.pad)
def _pad(ctx, x, pad, mode="constant", value=None):
    if mode != "constant" or any(p < 0 for p in pad):
        raise Unsupported(INEXPRESSIBLE_OP, f"pad mode={mode!r} or negative padding")
    return ctx.builder.pad(x.value, pads=list(pad), value=0.0 if value is None else value)


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
    @handles(varargs=True, from_meta=("dtype",))
    def build(ctx, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False, out=None):
        if requires_grad:
            raise Unsupported(INEXPRESSIBLE_OP,
                              "creating a leaf that requires grad inside the graph")
        if out is not None:
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "a creation op with out=...")
        shape = [ir_size(d) for d in sizes_of(size)]
        return Creation(lambda meta: ctx.builder.op(
            "full", value=value(meta.dtype) if callable(value) else value, shape=shape,
            dtype=ir_dtype(meta.dtype), device=_device(device)))
    return build


def uninitialized(dtype: torch.dtype):
    """What `empty` holds, as eager makes it: under torch.use_deterministic_algorithms(True)
    (with torch.utils.deterministic.fill_uninitialized_memory, guarded as global state)
    NaN for floats, the largest value for integers, True for bools; else any value (0)."""
    if not (torch.are_deterministic_algorithms_enabled() and
            torch.utils.deterministic.fill_uninitialized_memory):
        return 0
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    return True if dtype == torch.bool else torch.iinfo(dtype).max


entry(torch.zeros, creation=True, sizes=True)(_full_builder(0))
entry(torch.empty, creation=True, sizes=True)(_full_builder(uninitialized))
entry(torch.ones, creation=True, sizes=True)(_full_builder(1))


@entry(torch.full, creation=True, sizes=True)
def _full(ctx, size, fill_value, *, dtype=None, device=None, requires_grad=False,
          layout=None, out=None):
    if out is not None:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "full(out=...)")
    return _full_builder(fill_value)(ctx, size, dtype=dtype, device=device,
                                     requires_grad=requires_grad)


def _like_builder(value):
    @handles(varargs=value is None, from_meta=("dtype",))
    def build(ctx, x, *args, dtype=None, device=None, requires_grad=False, layout=None,
              memory_format=None, pin_memory=False):
        if requires_grad:
            raise Unsupported(INEXPRESSIBLE_OP,
                              "creating a leaf that requires grad inside the graph")
        fill = args[0] if value is None else value
        return Creation(lambda meta: ctx.builder.op(
            "full", value=fill(meta.dtype) if callable(fill) else fill,
            shape=list(x.value.type.shape), dtype=ir_dtype(meta.dtype),
            device=_device(device, x)))
    return build


entry(torch.zeros_like)(_like_builder(0))
entry(torch.empty_like)(_like_builder(uninitialized))
entry(torch.ones_like)(_like_builder(1))
entry(torch.full_like)(_like_builder(None))


def _random_builder(op, like):
    @handles(varargs=True, from_meta=("dtype",))
    def build(ctx, *args, dtype=None, device=None, generator=None, requires_grad=False,
              layout=None, pin_memory=False, memory_format=None, out=None):
        if requires_grad:
            raise Unsupported(INEXPRESSIBLE_OP,
                              "creating a leaf that requires grad inside the graph")
        if out is not None:
            raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, f"{op}(out=...)")
        if generator is not None:
            raise Unsupported(INEXPRESSIBLE_OP, f"{op}(generator=...)")
        src = args[0] if like else None
        shape = list(src.value.type.shape) if like else [ir_size(d) for d in sizes_of(args)]
        # eager fills the result in its memory order (`*_like`: the operand's, when dense;
        # Note [Random draws in eager's layout])
        return Creation(lambda meta: ctx.builder.op(
            op, shape=shape, dtype=ir_dtype(meta.dtype), device=_device(device, src),
            order=eager_layout.memory_order(meta) if like else None))
    return build


entry(torch.rand, creation=True, sizes=True)(_random_builder("rand", False))
entry(torch.randn, creation=True, sizes=True)(_random_builder("randn", False))
entry(torch.rand_like)(_random_builder("rand", True))
entry(torch.randn_like)(_random_builder("randn", True))


@entry(torch.arange, creation=True, sizes=True)
@handles(from_meta=("dtype",))
def _arange(ctx, start, end=None, step=1, *, dtype=None, device=None, requires_grad=False,
            layout=None, out=None):
    """A dynamic `end` stays a size expression when start and step are ints, step 1 and
    end >= start (guarded); any other dynamic bound is specialized (guarded)."""
    if requires_grad:
        raise Unsupported(INEXPRESSIBLE_OP, "creating a leaf that requires grad inside the graph")
    if out is not None:
        raise Unsupported(UNREPLAYABLE_SIDE_EFFECT, "arange(out=...)")
    if end is None:
        start, end = 0, start
    if isinstance(start, sympy.Basic) or isinstance(step, sympy.Basic) or (
            isinstance(end, sympy.Basic) and not (step == 1 and isinstance(start, int) and
                                                  ctx.decide(sympy.Ge(end, start)))):
        start, end, step = (ctx.specialize(v) if isinstance(v, sympy.Basic) else v
                            for v in (start, end, step))
    if not all(isinstance(v, (int, sympy.Basic)) for v in (start, end, step)):
        raise Unsupported(INEXPRESSIBLE_OP, "arange with non-integer bounds")
    return Creation(lambda meta: ctx.builder.op(
        "arange", start=start, end=end, step=step, dtype=ir_dtype(meta.dtype),
        device=_device(device)))


@entry(torch.tensor, torch.as_tensor, creation=True)
@handles(from_meta=("dtype",))
def _tensor(ctx, data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """Python data as a graph constant.  A numpy array is not: the caller may change its
    values between calls (no guard reads them), and as_tensor shares its memory (a write
    into the tensor reaches the array), so such a call runs in CPython (RB004)."""
    if type(data).__module__ == "numpy" and hasattr(data, "__array_interface__"):
        raise Unsupported(UNSUPPORTED_CALL,
                          "torch.tensor/as_tensor of a numpy array: its values and"
                                   " memory are the caller's")
    if requires_grad:
        raise Unsupported(INEXPRESSIBLE_OP, "creating a leaf that requires grad inside the graph")
    if tensors_in(data):
        raise Unsupported(INEXPRESSIBLE_OP, "torch.tensor() of tensors copies their values")
    return Creation(lambda meta: ctx.builder.op(
        "constant", data=torch.tensor(data, dtype=meta.dtype).tolist(),
        dtype=ir_dtype(meta.dtype), device=_device(device)))


@entry(T.copy_, inplace=True)
def _copy_(ctx, dst, src, non_blocking=False):
    """`dst.copy_(src)`: dst's new value is src broadcast to dst's shape (cast to its dtype
    by the in-place machinery).  A copy between tensors sharing storage is captured when
    their elements are disjoint or the same (`v.copy_(v)`); otherwise it runs in torch
    (RB010, Note [Overlapping writes] in refcomp/tracer/mutation.py, checked before this
    builds): a partial overlap raises there, and the order of element writes matters."""
    if not isinstance(src, TensorVar):
        raise Unsupported(INEXPRESSIBLE_OP, "copy_ from a non-tensor")
    if src.value.type.device != dst.value.type.device:
        raise Unsupported(INEXPRESSIBLE_OP, "copy_ between devices")
    if src.meta.is_complex() and not dst.meta.is_complex():
        raise Unsupported(INEXPRESSIBLE_OP, "copy_ of a complex tensor into a real one")
    return ctx.builder.broadcast_to(src.value, list(dst.value.type.shape))


# --- losses and attention: derived in the IR (spec/autograd.md, "Losses and attention") ---
# Note [Losses and attention in the IR]: ATen's cross_entropy_loss, nll_loss_nd and
# scaled_dot_product_attention have no IR rule; as opaque `aten` nodes they have no VJP
# and a graph reading them under grad ran op by op on the eager backend.  Under grad
# (grad mode on, an operand requires grad) they are built from IR ops with VJPs (ATen's
# math: log_softmax, the target's log-probability gathered, the masks, the reductions;
# softmax(q k^T * scale + mask) v), so the graph trains on the kernel backends.
# Otherwise, and for forms not modelled (SDPA with dropout, enable_gqa with other head
# counts, other batch shapes), the call stays the opaque ATen call: eager's kernels,
# eager's values (the entry raises RB013 and call_torch_or_opaque makes the opaque call).
def _under_grad(ctx, *operands) -> bool:
    return ctx.grad_enabled and any(isinstance(t, TensorVar) and t.requires_grad
                                    for t in operands)


def _target_picks(ctx, lp, target, weight, ignore_index, class_dim):
    """(-lp at the target class, the target's weight) per target element, both 0 where
    the target is ignore_index, as ATen's nll_loss; an other target outside [0, C)
    raises IndexError after the graph, as eager's does."""
    B = ctx.builder
    t = target.value
    classes = lp.type.shape[class_dim]
    valid = B.ne(t, B.scalar(ignore_index, like=t.type))
    bad = B.logical_and(valid, B.logical_or(B.lt(t, B.scalar(0, like=t.type)),
                                            B.ge(t, B.scalar(classes, like=t.type))))
    ctx.add_check(bad, "IndexError: Target is out of bounds.", t.type.shape)
    safe = B.where(B.logical_and(valid, B.logical_not(bad)), t, B.scalar(0, like=t.type))
    picked = B.squeeze(B.gather(lp, B.unsqueeze(safe, dim=class_dim), dim=class_dim),
                       dims=[class_dim])
    zero = B.scalar(0.0, like=lp.type, dtype=lp.type.dtype)
    if weight is None:
        w = B.cast(valid, dtype=lp.type.dtype)
        return B.where(valid, B.neg(picked), zero), w
    flat = B.reshape(safe, shape=[prod_of(t.type.shape)])
    w = B.reshape(B.index_select(weight.value, flat, dim=0), shape=list(t.type.shape))
    w = B.where(valid, w, zero)
    return B.neg(B.mul(picked, w)), w


def _reduce_loss(ctx, losses, weights, reduction):
    B = ctx.builder
    if reduction == 0:  # none
        return losses
    total = B.sum(losses, dims=[], keepdim=False)
    if reduction == 2:  # sum
        return total
    return B.div(total, B.sum(weights, dims=[], keepdim=False))  # mean: 0/0 is NaN, as ATen


def _loss_form(input, target, reduction):
    if not (isinstance(input, TensorVar) and input.meta.is_floating_point() and
            input.meta.dtype in (torch.float32, torch.float64) and
            isinstance(target, TensorVar) and reduction in (0, 1, 2)):
        return None
    return 1 if input.meta.dim() >= 2 else 0


@entry(torch._C._nn.nll_loss_nd, torch._C._nn.nll_loss)
def _nll_loss_nd(ctx, input, target, weight=None, reduction=1, ignore_index=-100):
    class_dim = _loss_form(input, target, reduction)
    if class_dim is None or target.meta.is_floating_point() or \
            not _under_grad(ctx, input, weight):
        raise Unsupported(INEXPRESSIBLE_OP, "nll_loss without grad, or of this form: ATen's call")
    losses, w = _target_picks(ctx, input.value, target, weight, ignore_index, class_dim)
    return _reduce_loss(ctx, losses, w, reduction)


@entry(torch._C._nn.cross_entropy_loss)
def _cross_entropy_loss(ctx, input, target, weight=None, reduction=1, ignore_index=-100,
                        label_smoothing=0.0):
    """ATen's cross_entropy_loss: log_softmax over the class dim, then nll_loss (class
    targets) or -sum(lp * target * weight) (probabilities), with label smoothing mixed in
    as cross_entropy_loss_label_smoothing does."""
    class_dim = _loss_form(input, target, reduction)
    if class_dim is None or not _under_grad(ctx, input, weight, target):
        raise Unsupported(INEXPRESSIBLE_OP,
                          "cross_entropy without grad, or of this form: ATen's call")
    B = ctx.builder
    lp = B.log_softmax(input.value, dim=class_dim)
    classes = lp.type.shape[class_dim]
    wb = None
    if weight is not None:  # [1, C, 1, ...]: broadcast over the class dim
        shape = [1] * lp.type.rank
        shape[class_dim] = classes
        wb = B.reshape(weight.value, shape=shape)
    if target.meta.is_floating_point():  # class probabilities
        p = target.value
        if label_smoothing > 0:
            p = B.add(B.mul(p, 1 - label_smoothing), label_smoothing / classes)
        terms = B.mul(lp, p) if wb is None else B.mul(B.mul(lp, p), wb)
        if reduction == 0:
            return B.neg(B.sum(terms, dims=[class_dim], keepdim=False))
        total = B.neg(B.sum(terms, dims=[], keepdim=False))
        if reduction == 2:
            return total
        n = prod_of(lp.type.shape) // classes if classes else 0
        return B.div(total, B.scalar(float(n) if n else float("nan"), like=total.type))
    losses, w = _target_picks(ctx, lp, target, weight, ignore_index, class_dim)
    nll = _reduce_loss(ctx, losses, w, reduction)
    if label_smoothing <= 0:
        return nll
    valid = B.ne(target.value, B.scalar(ignore_index, like=target.value.type))
    terms = lp if wb is None else B.mul(lp, wb)
    smooth = B.where(valid, B.neg(B.sum(terms, dims=[class_dim], keepdim=False)),
                     B.scalar(0.0, like=lp.type, dtype=lp.type.dtype))
    smooth = _reduce_loss(ctx, smooth, w, reduction)
    return B.add(B.mul(nll, 1 - label_smoothing), B.mul(smooth, label_smoothing / classes))


@entry(torch.gather, T.gather)
def _gather(ctx, input, dim, index, *, sparse_grad=False, out=None):
    """torch.gather: the IR's gather; an index outside [0, size) raises after the graph
    (RuntimeError, eager's type), and reads index 0 meanwhile."""
    if sparse_grad or out is not None or not isinstance(index, TensorVar) or \
            not isinstance(input, TensorVar) or input.meta.dim() != index.meta.dim() or \
            input.meta.dim() == 0 or input.meta.is_complex():
        raise Unsupported(INEXPRESSIBLE_OP, "gather of this form: ATen's call")
    B = ctx.builder
    d = dim % input.meta.dim()
    size = input.value.type.shape[d]
    i = index.value
    bad = B.logical_or(B.lt(i, B.scalar(0, like=i.type)), B.ge(i, B.scalar(size, like=i.type)))
    ctx.add_check(bad, f"index out of bounds for dimension {d} with size {size} (gather)",
                  i.type.shape)
    return B.gather(input.value, B.where(bad, B.scalar(0, like=i.type), i), dim=d)


@entry(F.scaled_dot_product_attention)
def _sdpa(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
          scale=None, enable_gqa=False):
    """softmax(q k^T * scale + mask) v, ATen's math path, under grad; a row whose mask
    hides every key gives 0, as ATen's safe softmax.  Dropout (p > 0) stays ATen's call."""
    qkv = (query, key, value)
    modelled = all(isinstance(t, TensorVar) and t.meta.dim() >= 2 and
                   t.meta.dtype in (torch.float32, torch.float64) for t in qkv) and \
        dropout_p == 0 and query.meta.shape[:-2] == key.meta.shape[:-2] == \
        value.meta.shape[:-2] and not (is_causal and attn_mask is not None) and \
        (attn_mask is None or isinstance(attn_mask, TensorVar))
    # enable_gqa repeats k and v over q's heads where their head counts differ; with the
    # batch dims (heads included) equal, as required above, it changes nothing
    modelled = modelled and (not enable_gqa or query.meta.shape[:-2] == key.meta.shape[:-2])
    if not modelled or not _under_grad(ctx, *qkv, attn_mask):
        raise Unsupported(INEXPRESSIBLE_OP, "attention without grad (the fused call) or with"
                                            " dropout, grouped heads, other dtypes or batch dims")
    B = ctx.builder
    q, k, v = (t.value for t in qkv)
    e = q.type.shape[-1]
    s = scale if scale is not None else 1.0 / math.sqrt(e)
    scores = B.matmul(B.mul(q, s), B.transpose(k, -2 + k.type.rank, -1 + k.type.rank))
    length, keys = scores.type.shape[-2:]
    ninf = B.scalar(float("-inf"), like=scores.type, dtype=scores.type.dtype)
    if is_causal:
        row = B.reshape(B.arange(end=length), shape=[length, 1])
        col = B.reshape(B.arange(end=keys), shape=[1, keys])
        scores = B.where(B.le(col, row), scores, ninf)
    elif attn_mask is not None:
        m = attn_mask.value
        scores = B.where(m, scores, ninf) if m.type.dtype == bool_ else B.add(scores, m)
    w = B.softmax(scores, dim=-1)
    if attn_mask is not None:  # safe softmax: a fully masked row attends to nothing
        hidden = B.all(B.eq(scores, ninf), dims=[-1], keepdim=True)
        w = B.where(hidden, B.scalar(0.0, like=w.type, dtype=w.type.dtype), w)
    out = B.matmul(w, v)
    # eager's attention node saves q, k, v and its output (Note [Saved by eager]): one of
    # them changed in place before backward raises there, as here
    ctx.eager_saves.instead[out] = (q, k, v, out)
    return out
