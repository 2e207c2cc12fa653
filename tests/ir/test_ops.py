"""Every op's reference semantics (infer + ref, via the interpreter) equals torch eager.

`CASES` maps each op name to (torch callable, strategy of (inputs, attrs)).  Each
example builds a one-node graph with GraphBuilder, runs it with `ir.run` (which
checks the result's shape and dtype against the inferred type) and compares with
torch: values (dtype-aware tolerance, NaN equal to NaN) and the result dtype.
A registry walk fails if an op has no case.  Spec: spec/ops.md.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ir import GraphBuilder, TensorType, run
from ir.interpreter import InterpreterError
from ir.ops.registry import COMPOSITE, FUSED, POINTWISE, all_ops, lookup
from ir.types import (
    BY_TORCH_NAME,
    DType,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    round_to_dtype,
    u8,
)

ROOT = Path(__file__).resolve().parents[2]
FLOATS = (f32, f64, f16, bf16)
INTS = (i64, i32, i16, i8, u8)
ALL = FLOATS + INTS + (bool_,)
NON_BOOL = FLOATS + INTS


# --- conversions and comparison -----------------------------------------------------------
def to_torch(array: np.ndarray, dtype: DType) -> torch.Tensor:
    if dtype is bf16:  # stored as float32 holding bf16 values: the conversion is exact
        array = array.astype(np.float32)
        return torch.from_numpy(np.array(array, order="C")).to(torch.bfloat16)
    # np.array keeps rank 0 (np.ascontiguousarray would make it rank 1).
    return torch.from_numpy(np.array(array, order="C"))


def from_torch(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.numpy()


def torch_dtype(dtype: DType) -> torch.dtype:
    return getattr(torch, dtype.torch_name)


TOLERANCE = {f64: (1e-9, 1e-12), f32: (2e-5, 1e-6), f16: (2e-3, 1e-3), bf16: (1.6e-2, 1e-2)}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: DType, what: str):
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if dtype.is_float:
        rtol, atol = TOLERANCE[dtype]
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


# --- input strategies -----------------------------------------------------------------------
def shapes(min_rank=0, max_rank=3, min_side=0, max_side=3):
    return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min_side,
                            max_side=max_side)


def elements(dtype: DType, lo=-8.0, hi=8.0, specials=False):
    if dtype.is_bool:
        return st.booleans()
    if dtype.is_int:
        info = np.iinfo(dtype.np)
        return st.integers(max(int(lo), info.min), min(int(hi), info.max))
    width = 16 if dtype is f16 else 32
    values = st.floats(lo, hi, width=width)
    if specials:
        values = values | st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0])
    return values


@st.composite
def arrays(draw, dtype: DType, shape, **kw):
    array = draw(hnp.arrays(dtype.np, shape, elements=elements(dtype, **kw)))
    return round_to_dtype(array, dtype) if dtype is bf16 else array


@st.composite
def pointwise(draw, arity, dtypes, mixed=False, **kw):
    """Operands of one shape (sometimes one of them rank 0); dtypes equal unless mixed."""
    shape = draw(shapes())
    first = draw(st.sampled_from(dtypes))
    inputs = []
    for i in range(arity):
        dtype = draw(st.sampled_from(dtypes)) if mixed else first
        rank0 = arity > 1 and i > 0 and draw(st.integers(0, 4)) == 0
        inputs.append((draw(arrays(dtype, () if rank0 else shape, **kw)), dtype))
    return inputs, {}


def unary(dtypes, **kw):
    return pointwise(1, dtypes, **kw)


def binary(dtypes, mixed=True, **kw):
    return pointwise(2, dtypes, mixed=mixed, **kw)


@st.composite
def nonzero_divisor(draw, dtypes):
    """Integer division by zero raises in torch: draw divisors away from zero."""
    inputs, attrs = draw(binary(dtypes))
    (a, ta), (b, tb) = inputs
    if not (ta.is_float or tb.is_float):
        b = np.where(b == 0, np.ones((), b.dtype), b)
    return [(a, ta), (b, tb)], attrs


@st.composite
def power(draw):
    """Integer powers need non-negative exponents; keep bases small against overflow."""
    dtypes = NON_BOOL
    base_t, exp_t = draw(st.sampled_from(dtypes)), draw(st.sampled_from(dtypes))
    shape = draw(shapes())
    base = draw(arrays(base_t, shape, lo=-3, hi=3))
    exponent = draw(arrays(exp_t, shape, lo=0 if not exp_t.is_float else -2, hi=3))
    return [(base, base_t), (exponent, exp_t)], {}


@st.composite
def shift(draw):
    dtype = draw(st.sampled_from(INTS))
    shape = draw(shapes())
    x = draw(arrays(dtype, shape, lo=-100, hi=100))
    bits = dtype.bits
    s = draw(arrays(dtype, shape, lo=0 if dtype is u8 else -2, hi=bits + 2))
    return [(x, dtype), (s, dtype)], {}


@st.composite
def where_inputs(draw, dtypes=ALL):
    shape = draw(shapes())
    cond = draw(arrays(bool_, shape))
    a_t, b_t = draw(st.sampled_from(dtypes)), draw(st.sampled_from(dtypes))
    a = draw(arrays(a_t, shape))
    b = draw(arrays(b_t, draw(st.sampled_from([shape, ()]))))
    return [(cond, bool_), (a, a_t), (b, b_t)], {}


@st.composite
def clamp_inputs(draw, dtypes=NON_BOOL):
    dtype = draw(st.sampled_from(dtypes))
    x = draw(arrays(dtype, draw(shapes())))
    bound = st.integers(-4, 4) | st.floats(-4, 4, width=16)
    lo = draw(st.none() | bound)
    hi = draw(bound if lo is None else st.none() | bound)  # torch needs one bound at least
    if dtype is u8:  # a negative bound does not fit u8 (torch raises)
        lo = None if isinstance(lo, (int, float)) and lo < 0 else lo
        hi = None if isinstance(hi, (int, float)) and hi < 0 else hi
    return [(x, dtype)], {"min": lo, "max": hi}


@st.composite
def cast_inputs(draw):
    src, dst = draw(st.sampled_from(ALL)), draw(st.sampled_from(ALL))
    # Out-of-range float -> int conversion is undefined (C) in torch: stay in range.
    lo = 0 if dst is u8 else -100
    hi = 127 if dst in (i8,) else 200
    if not src.is_float:
        lo, hi = (-300, 300) if src not in (i8, u8) else (-128, 255)
    x = draw(arrays(src, draw(shapes()), lo=lo, hi=hi))
    return [(x, src)], {"dtype": dst}


def _gelu_attrs():
    return st.fixed_dictionaries({"approximate": st.sampled_from(["none", "tanh"])})


@st.composite
def with_attrs(draw, inputs, attrs):
    ins, extra = draw(inputs)
    return ins, {**extra, **draw(attrs)}


# --- reductions -----------------------------------------------------------------------------
@st.composite
def reduce_inputs(draw, dtypes, extra=None):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes())
    x = draw(arrays(dtype, shape, lo=-3, hi=3))
    rank = len(shape)
    dims = draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda d: d % rank,
                         max_size=rank)) if rank else draw(st.sampled_from([[], [0], [-1]]))
    attrs = {"dims": dims, "keepdim": draw(st.booleans())}
    if extra is not None:
        attrs.update(draw(extra))
    return [(x, dtype)], attrs


@st.composite
def arg_inputs(draw):
    dtype = draw(st.sampled_from(NON_BOOL))
    shape = draw(shapes())
    x = draw(arrays(dtype, shape, lo=-3, hi=3, specials=dtype.is_float))
    rank = len(shape)
    dim = draw(st.none() | st.integers(-max(rank, 1), max(rank, 1) - 1))
    return [(x, dtype)], {"dim": dim, "keepdim": draw(st.booleans())}


def _dims(dims):
    return tuple(dims) if dims else None


def _prod(x, dims, keepdim):
    # torch.prod takes one dim at a time.
    if not dims or x.dim() == 0:
        out = torch.prod(x)
        return out.reshape((1,) * x.dim()) if keepdim else out
    for d in sorted((d % x.dim() for d in dims), reverse=True):
        x = torch.prod(x, dim=d, keepdim=keepdim)
    return x


# --- layout ---------------------------------------------------------------------------------
@st.composite
def reshape_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes())
    x = draw(arrays(dtype, shape))
    n = int(np.prod(shape))
    if n == 0:
        target = draw(st.sampled_from([[0], [0, 5], [2, 0, 1]]))
    else:
        # Split n into a random factorization, with size-1 dims sprinkled in.
        target, rest = [], n
        for p in (2, 3, 5, 7):
            while rest % p == 0:
                rest //= p
                if target and draw(st.booleans()):
                    target[-1] *= p
                else:
                    target.append(p)
        target += [rest] if rest > 1 else []
        target = draw(st.permutations(target))
        target = list(target) + [1] * draw(st.integers(0, 2))
        target = draw(st.permutations(target))
    return [(x, dtype)], {"shape": list(target)}


@st.composite
def permute_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes())
    return [(draw(arrays(dtype, shape)), dtype)], {"perm": draw(st.permutations(range(len(shape))))}


@st.composite
def slice_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(min_rank=1, max_side=6))
    rank = len(shape)
    attrs = {"dim": draw(st.integers(-rank, rank - 1)), "start": draw(st.integers(-7, 7)),
             "stop": draw(st.integers(-7, 9)), "step": draw(st.integers(1, 3))}
    return [(draw(arrays(dtype, shape)), dtype)], attrs


@st.composite
def slice_scatter_inputs(draw, dtypes=ALL):
    [(x, dtype)], attrs = draw(slice_inputs(dtypes))
    window = _slice_ref_shape(x, **attrs)
    return [(x, dtype), (draw(arrays(dtype, window)), dtype)], attrs


def _slice_ref_shape(x, dim, start, stop, step):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, stop, step)
    return x[tuple(index)].shape


def _torch_slice_scatter(x, src, dim, start, stop, step):
    out = x.clone()
    _torch_slice(out, dim, start, stop, step).copy_(src)
    return out


def _torch_slice(x, dim, start, stop, step):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, stop, step)
    return x[tuple(index)]


@st.composite
def squeeze_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(max_side=2))
    rank = len(shape)
    dims = draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda d: d % rank,
                         max_size=rank)) if rank else []
    return [(draw(arrays(dtype, shape)), dtype)], {"dims": dims}


@st.composite
def unsqueeze_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes())
    rank = len(shape)
    return [(draw(arrays(dtype, shape)), dtype)], {"dim": draw(st.integers(-rank - 1, rank))}


@st.composite
def expand_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(max_side=2))
    target = [draw(st.integers(0, 3)) if d == 1 else d for d in shape]
    return [(draw(arrays(dtype, shape)), dtype)], {"shape": target}


@st.composite
def cat_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = list(draw(shapes(min_rank=1)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        shape[dim] = draw(st.integers(0, 3))
        parts.append((draw(arrays(dtype, tuple(shape))), dtype))
    return parts, {"dim": dim}


@st.composite
def pad_inputs(draw, dtypes=NON_BOOL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes())
    pads = draw(st.lists(st.integers(0, 2), min_size=2 * min(len(shape), 1),
                         max_size=2 * len(shape)).filter(lambda p: len(p) % 2 == 0))
    value = draw(st.integers(-3, 3) if not dtype.is_float else st.floats(-3, 3, width=16))
    if dtype is u8:
        value = abs(value)
    return [(draw(arrays(dtype, shape)), dtype)], {"pads": pads, "value": value}


@st.composite
def index_select_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(min_rank=1))
    rank = len(shape)
    dim = draw(st.integers(-rank, rank - 1))
    size = shape[dim]
    n = draw(st.integers(0, 4)) if size else 0
    idx_t = draw(st.sampled_from([i64, i32]))
    index = np.array(draw(st.lists(st.integers(0, max(size - 1, 0)), min_size=n, max_size=n)),
                     dtype=idx_t.np)
    return [(draw(arrays(dtype, shape)), dtype), (index, idx_t)], {"dim": dim}


@st.composite
def gather_inputs(draw, dtypes=ALL):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(min_rank=1))
    rank = len(shape)
    dim = draw(st.integers(-rank, rank - 1))
    d = dim % rank
    index_shape = tuple(draw(st.integers(0, s)) if i != d else draw(st.integers(0, 3))
                        for i, s in enumerate(shape))
    if shape[d] == 0:
        index_shape = tuple(0 if i == d else s for i, s in enumerate(index_shape))
    index = draw(hnp.arrays(np.int64, index_shape,
                            elements=st.integers(0, max(shape[d] - 1, 0))))
    return [(draw(arrays(dtype, shape)), dtype), (index, i64)], {"dim": dim}


# --- creation and extern ----------------------------------------------------------------------
@st.composite
def full_attrs(draw):
    dtype = draw(st.sampled_from(ALL))
    value = draw(elements(dtype, lo=-100, hi=100))
    return [], {"value": value, "shape": list(draw(shapes())), "dtype": dtype}


@st.composite
def size_value_attrs(draw):
    dtype = draw(st.sampled_from((i64, i32, f32, f64, f16)))
    return [], {"value": draw(st.integers(0, 2000)), "dtype": dtype}


@st.composite
def arange_attrs(draw):
    dtype = draw(st.sampled_from((i64, i32, f32, f64)))
    start, end = draw(st.integers(-10, 10)), draw(st.integers(-10, 10))
    step = draw(st.integers(1, 4)) if end >= start else -draw(st.integers(1, 4))
    return [], {"start": start, "end": end, "step": step, "dtype": dtype}


@st.composite
def constant_attrs(draw):
    dtype = draw(st.sampled_from(ALL))
    data = draw(arrays(dtype, draw(shapes(max_rank=2))))
    return [], {"data": data.tolist(), "dtype": dtype}


@st.composite
def matmul_inputs(draw, dtypes=(f32, f64, f16, bf16, i64, i32)):
    dtype = draw(st.sampled_from(dtypes))
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))
    batch = list(draw(shapes(max_rank=2)))
    kind = draw(st.sampled_from(["mm", "bmm", "mv", "vm", "vv"]))
    a_shape, b_shape = {"mm": ([m, k], [k, n]), "bmm": (batch + [m, k], batch + [k, n]),
                        "mv": ([m, k], [k]), "vm": ([k], [k, n]), "vv": ([k], [k])}[kind]
    a = draw(arrays(dtype, tuple(a_shape), lo=-3, hi=3))
    b = draw(arrays(dtype, tuple(b_shape), lo=-3, hi=3))
    return [(a, dtype), (b, dtype)], {}


@st.composite
def conv2d_inputs(draw, dtypes=FLOATS):
    dtype = draw(st.sampled_from(dtypes))
    groups = draw(st.integers(1, 2))
    n, cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    padding = [draw(st.integers(0, 1)), draw(st.integers(0, 1))]
    dilation = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    h = draw(st.integers(dilation[0] * (kh - 1) + 1 - 2 * padding[0], 6).filter(lambda v: v > 0))
    w = draw(st.integers(dilation[1] * (kw - 1) + 1 - 2 * padding[1], 6).filter(lambda v: v > 0))
    x = draw(arrays(dtype, (n, cg * groups, h, w), lo=-2, hi=2))
    weight = draw(arrays(dtype, (og * groups, cg, kh, kw), lo=-2, hi=2))
    return [(x, dtype), (weight, dtype)], {"stride": stride, "padding": padding,
                                           "dilation": dilation, "groups": groups}


@st.composite
def embedding_inputs(draw, dtypes=FLOATS):
    dtype = draw(st.sampled_from(dtypes))
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(0, 3))
    idx_t = draw(st.sampled_from([i64, i32]))
    index = draw(hnp.arrays(idx_t.np, draw(shapes(max_rank=2)), elements=st.integers(0, rows - 1)))
    return [(draw(arrays(dtype, (rows, cols))), dtype), (index, idx_t)], {}


@st.composite
def pool2d_inputs(draw, avg=False, dtypes=FLOATS):
    dtype = draw(st.sampled_from(dtypes))
    kernel = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    dilation = [1, 1] if avg else [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    padding = [draw(st.integers(0, ((k - 1) * d + 1) // 2)) for k, d in zip(kernel, dilation)]
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    x = draw(arrays(dtype, (draw(st.integers(1, 2)), draw(st.integers(1, 2)), h, w), lo=-3,
                    hi=3))
    attrs = {"kernel_size": kernel, "stride": stride, "padding": padding,
             "ceil_mode": draw(st.booleans())}
    if avg:
        attrs["count_include_pad"] = draw(st.booleans())
    else:
        attrs["dilation"] = dilation
    return [(x, dtype)], attrs


# --- scatters and gradient externs (the VJPs' own ops) -------------------------------------
@st.composite
def index_add_inputs(draw, dtypes=ALL):
    [(x, dtype), (index, idx_t)], attrs = draw(index_select_inputs(dtypes))
    d = attrs["dim"] % x.ndim
    src_shape = tuple(len(index) if i == d else s for i, s in enumerate(x.shape))
    return [(x, dtype), (index, idx_t), (draw(arrays(dtype, src_shape)), dtype)], attrs


@st.composite
def scatter_add_inputs(draw, dtypes=ALL):
    [(x, dtype), (index, idx_t)], attrs = draw(gather_inputs(dtypes))
    return [(x, dtype), (index, idx_t), (draw(arrays(dtype, index.shape)), dtype)], attrs


def _out_grad(draw, op, inputs, attrs, dtype):
    """An output gradient for `op` applied to `inputs` (its inferred shape)."""
    b = GraphBuilder()
    xs = [b.input(f"x{i}", TensorType(dt, a.shape)) for i, (a, dt) in enumerate(inputs)]
    try:
        shape = tuple(int(d) for d in b.op(op, *xs, **attrs).type.shape)
    except TypeError:
        assume(False)  # the drawn forward is ill-typed (torch rejects it too)
    return draw(arrays(dtype, shape, lo=-2, hi=2))


@st.composite
def conv2d_grad_inputs(draw, weight=False, dtypes=FLOATS):
    [(x, dtype), (w, _)], attrs = draw(conv2d_inputs(dtypes))
    g = _out_grad(draw, "conv2d", [(x, dtype), (w, dtype)], attrs, dtype)
    if weight:
        return [(x, dtype), (g, dtype)], {"weight_shape": list(w.shape), **attrs}
    return [(g, dtype), (w, dtype)], {"input_shape": list(x.shape), **attrs}


def has_empty_window(shape, kernel_size, stride, padding, dilation=(1, 1), ceil_mode=False,
                     **_):
    """Whether some pooling window lies wholly in the padding.  torch's CPU max_pool2d
    backward writes out of bounds for such a window (heap corruption seen with torch
    2.13), so gradient tests keep clear of them."""
    for d in range(2):
        size, k, s, p, dil = shape[2 + d], kernel_size[d], stride[d], padding[d], dilation[d]
        span = size + 2 * p - dil * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
        out = span // s + 1
        if ceil_mode and (out - 1) * s >= size + p:
            out -= 1
        for o in range(max(out, 0)):
            if not any(0 <= o * s - p + i * dil < size for i in range(k)):
                return True
    return False


@st.composite
def max_pool2d_grad_safe(draw, dtypes=FLOATS):
    [(x, dtype)], attrs = draw(pool2d_inputs(False, dtypes))
    assume(not has_empty_window(x.shape, **attrs))
    return [(x, dtype)], attrs


@st.composite
def pool2d_grad_inputs(draw, avg=False, dtypes=FLOATS):
    [(x, dtype)], attrs = draw(pool2d_inputs(avg, dtypes) if avg else
                               max_pool2d_grad_safe(dtypes))
    g = _out_grad(draw, "avg_pool2d" if avg else "max_pool2d", [(x, dtype)], attrs, dtype)
    if avg:
        return [(g, dtype)], {"input_shape": list(x.shape), **attrs}
    return [(g, dtype), (x, dtype)], attrs


def _torch_index_add(x, index, src, dim):
    return x + src.sum() if x.dim() == 0 and len(index) else (
        x.clone() if x.dim() == 0 else torch.index_add(x, dim, index.long(), src))


def _torch_max_pool2d_grad(g, x, kernel_size, stride, padding, dilation, ceil_mode):
    aten = torch.ops.aten
    _, idx = aten.max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)
    return aten.max_pool2d_with_indices_backward(g, x, kernel_size, stride, padding, dilation,
                                                 ceil_mode, idx)


def _torch_avg_pool2d_grad(g, input_shape, kernel_size, stride, padding, ceil_mode,
                           count_include_pad):
    return torch.ops.aten.avg_pool2d_backward(g, g.new_empty(input_shape), kernel_size, stride,
                                              padding, ceil_mode, count_include_pad, None)


# --- the table --------------------------------------------------------------------------------
CASES = {
    # unary, result dtype = operand dtype
    "neg": (torch.neg, unary(NON_BOOL)),
    "abs": (torch.abs, unary(NON_BOOL)),
    "relu": (torch.relu, unary(NON_BOOL)),
    "sign": (torch.sign, unary(ALL, specials=True)),
    "floor": (torch.floor, unary(NON_BOOL, specials=True)),
    "ceil": (torch.ceil, unary(NON_BOOL, specials=True)),
    "round": (torch.round, unary(NON_BOOL)),
    "trunc": (torch.trunc, unary(NON_BOOL, specials=True)),
    # unary, computed in floating point
    "exp": (torch.exp, unary(ALL, specials=True)),
    "log": (torch.log, unary(ALL, specials=True)),
    "log1p": (torch.log1p, unary(ALL)),
    "expm1": (torch.expm1, unary(ALL)),
    "sqrt": (torch.sqrt, unary(ALL, specials=True)),
    "rsqrt": (torch.rsqrt, unary(ALL)),
    "sin": (torch.sin, unary(ALL)),
    "cos": (torch.cos, unary(ALL)),
    "tanh": (torch.tanh, unary(ALL, specials=True)),
    "sigmoid": (torch.sigmoid, unary(ALL, specials=True)),
    "erf": (torch.erf, unary(ALL, specials=True)),
    "silu": (F.silu, unary(FLOATS)),
    "reciprocal": (torch.reciprocal, unary(ALL)),
    "gelu": (F.gelu, with_attrs(unary(FLOATS), _gelu_attrs())),
    "copy": (torch.clone, unary(ALL, specials=True)),
    "stop_gradient": (torch.detach, unary(ALL, specials=True)),
    "logical_not": (torch.logical_not, unary(ALL, specials=True)),
    "isnan": (torch.isnan, unary(ALL, specials=True)),
    "bitwise_not": (torch.bitwise_not, unary(INTS + (bool_,), lo=-100, hi=100)),
    # binary
    "add": (torch.add, binary(ALL)),
    "sub": (torch.sub, binary(NON_BOOL)),
    "mul": (torch.mul, binary(ALL)),
    "div": (torch.div, binary(ALL, specials=True)),
    "floor_divide": (torch.floor_divide, nonzero_divisor(NON_BOOL)),
    "div_floor": (lambda a, b: torch.div(a, b, rounding_mode="floor"),
                  nonzero_divisor(NON_BOOL)),
    "remainder": (torch.remainder, nonzero_divisor(NON_BOOL)),
    "fmod": (torch.fmod, nonzero_divisor(NON_BOOL)),
    "pow": (torch.pow, power()),
    "maximum": (torch.maximum, binary(ALL, specials=True)),
    "minimum": (torch.minimum, binary(ALL, specials=True)),
    "atan2": (torch.atan2, binary(ALL, specials=True)),
    "eq": (torch.eq, binary(ALL, lo=-2, hi=2)),
    "ne": (torch.ne, binary(ALL, lo=-2, hi=2)),
    "lt": (torch.lt, binary(ALL, lo=-2, hi=2)),
    "le": (torch.le, binary(ALL, lo=-2, hi=2)),
    "gt": (torch.gt, binary(ALL, lo=-2, hi=2, specials=True)),
    "ge": (torch.ge, binary(ALL, lo=-2, hi=2)),
    "logical_and": (torch.logical_and, binary(ALL, lo=-1, hi=1)),
    "logical_or": (torch.logical_or, binary(ALL, lo=-1, hi=1)),
    "logical_xor": (torch.logical_xor, binary(ALL, lo=-1, hi=1, specials=True)),
    "bitwise_and": (torch.bitwise_and, binary(INTS + (bool_,), lo=-100, hi=100)),
    "bitwise_or": (torch.bitwise_or, binary(INTS + (bool_,), lo=-100, hi=100)),
    "bitwise_xor": (torch.bitwise_xor, binary(INTS + (bool_,), lo=-100, hi=100)),
    "bitwise_left_shift": (torch.bitwise_left_shift, shift()),
    "bitwise_right_shift": (torch.bitwise_right_shift, shift()),
    # ternary and attributes
    "where": (torch.where, where_inputs()),
    "clamp": (lambda x, min, max: torch.clamp(x, min=min, max=max), clamp_inputs()),
    "cast": (lambda x, dtype: x.to(torch_dtype(dtype)), cast_inputs()),
    # reductions
    "sum": (lambda x, dims, keepdim: torch.sum(x, dim=_dims(dims), keepdim=keepdim),
            reduce_inputs(ALL)),
    "prod": (_prod, reduce_inputs(ALL)),
    "amax": (lambda x, dims, keepdim: torch.amax(x, dim=dims, keepdim=keepdim),
             reduce_inputs(ALL)),
    "amin": (lambda x, dims, keepdim: torch.amin(x, dim=dims, keepdim=keepdim),
             reduce_inputs(ALL)),
    "mean": (lambda x, dims, keepdim: torch.mean(x, dim=_dims(dims), keepdim=keepdim),
             reduce_inputs(FLOATS)),
    "var": (lambda x, dims, keepdim, correction: torch.var(
        x, dim=_dims(dims), keepdim=keepdim, correction=correction),
        reduce_inputs(FLOATS, st.fixed_dictionaries({"correction": st.integers(0, 2)}))),
    "any": (lambda x, dims, keepdim: torch.any(x, dim=_dims(dims), keepdim=keepdim),
            reduce_inputs(ALL)),
    "all": (lambda x, dims, keepdim: torch.all(x, dim=_dims(dims), keepdim=keepdim),
            reduce_inputs(ALL)),
    "argmax": (torch.argmax, arg_inputs()),
    "argmin": (torch.argmin, arg_inputs()),
    # layout
    "reshape": (lambda x, shape: torch.reshape(x, shape), reshape_inputs()),
    "permute": (lambda x, perm: torch.permute(x, perm), permute_inputs()),
    "slice": (_torch_slice, slice_inputs()),
    "slice_scatter": (_torch_slice_scatter, slice_scatter_inputs()),
    "squeeze": (lambda x, dims: torch.squeeze(x, dim=tuple(dims)) if dims else torch.squeeze(x),
                squeeze_inputs()),
    "unsqueeze": (torch.unsqueeze, unsqueeze_inputs()),
    "expand": (lambda x, shape: x.expand(shape), expand_inputs()),
    "cat": (lambda *xs, dim: torch.cat(xs, dim=dim), cat_inputs()),
    "pad": (lambda x, pads, value: F.pad(x, pads, value=value), pad_inputs()),
    "index_select": (lambda x, index, dim: torch.index_select(x, dim, index),
                     index_select_inputs()),
    "gather": (lambda x, index, dim: torch.gather(x, dim, index), gather_inputs()),
    "index_add": (_torch_index_add, index_add_inputs()),
    "scatter_add": (lambda x, index, src, dim: x + src.sum() if x.dim() == 0 and index.numel()
                    else (x.clone() if x.dim() == 0 else torch.scatter_add(x, dim, index, src)),
                    scatter_add_inputs()),
    # creation
    "full": (lambda value, shape, dtype: torch.full(shape, value, dtype=torch_dtype(dtype)),
             full_attrs()),
    "size_value": (lambda value, dtype: torch.tensor(value, dtype=torch_dtype(dtype)),
                   size_value_attrs()),
    "arange": (lambda start, end, step, dtype: torch.arange(
        start, end, step, dtype=torch_dtype(dtype)), arange_attrs()),
    "constant": (lambda data, dtype: torch.tensor(data, dtype=torch_dtype(dtype)),
                 constant_attrs()),
    # extern
    "matmul": (torch.matmul, matmul_inputs()),
    "conv2d": (F.conv2d, conv2d_inputs()),
    "embedding": (lambda weight, indices: F.embedding(indices, weight), embedding_inputs()),
    "max_pool2d": (F.max_pool2d, pool2d_inputs()),
    "avg_pool2d": (F.avg_pool2d, pool2d_inputs(avg=True)),
    "conv2d_grad_input": (lambda g, w, input_shape, **conv: torch.nn.grad.conv2d_input(
        input_shape, w, g, **conv), conv2d_grad_inputs()),
    "conv2d_grad_weight": (lambda x, g, weight_shape, **conv: torch.nn.grad.conv2d_weight(
        x, weight_shape, g, **conv), conv2d_grad_inputs(weight=True)),
    "max_pool2d_grad": (_torch_max_pool2d_grad, pool2d_grad_inputs()),
    "avg_pool2d_grad": (_torch_avg_pool2d_grad, pool2d_grad_inputs(avg=True)),
}

# Random ops cannot equal torch's draws; `test_random_op` checks them instead.
RANDOM_OPS = {"rand", "randn", "dropout_mask"}
# `aten` (an opaque torch call; its semantics are torch itself): tests/ir/test_opaque.py.
TESTED_ELSEWHERE = {op.name for op in all_ops() if op.category in (COMPOSITE, FUSED)} | {"aten"} \
    | {op.name for op in all_ops() if op.complex and op.name not in CASES}  # test_complex_values.py


def _build_and_run(name, inputs, attrs):
    b = GraphBuilder(name)
    values = [b.input(f"x{i}", TensorType(dt, a.shape)) for i, (a, dt) in enumerate(inputs)]
    out = b.op(name, *values, **attrs)
    (result,) = run(b.build([out]), [a for a, _ in inputs])
    return out.type, result


def _expected(name, torch_fn, inputs, attrs):
    tensors = [to_torch(a, dt) for a, dt in inputs]
    # A pointwise op promotes rank-0 operands like any other (torch would not let a
    # zero-dim tensor raise a dimensioned one within its category): torch sees them expanded.
    full = max((t.shape for t in tensors), key=len, default=())
    if len(full) > 0 and lookup(name).category == POINTWISE:
        tensors = [t.expand(full) if t.dim() == 0 else t for t in tensors]
    return torch_fn(*tensors, **attrs)


def _check(name, inputs, attrs):
    torch_fn, _ = CASES[name]
    try:
        expected = _expected(name, torch_fn, inputs, attrs)
    except (RuntimeError, IndexError, ValueError) as e:
        # torch rejects the input (e.g. amax over an empty dim): so must refcomp.
        with pytest.raises((InterpreterError, TypeError, ValueError)):
            _build_and_run(name, inputs, attrs)
        return str(e)
    out_type, result = _build_and_run(name, inputs, attrs)
    assert out_type.dtype == BY_TORCH_NAME[str(expected.dtype).removeprefix("torch.")], \
        f"{name}: inferred {out_type.dtype}, torch gives {expected.dtype}"
    what = f"{name} on {[(a.shape, str(dt)) for a, dt in inputs]} {attrs}"
    assert_close(result, from_torch(expected), out_type.dtype, what)
    return None


def test_every_op_has_a_case():
    missing = [op.name for op in all_ops()
               if op.name not in CASES and op.name not in RANDOM_OPS | TESTED_ELSEWHERE]
    assert missing == [], f"ops without a torch comparison in CASES: {missing}"
    stale = set(CASES) - {op.name for op in all_ops()}
    assert not stale, f"CASES names ops that are not registered: {stale}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_ref_equals_torch(name):
    _, strategy = CASES[name]
    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(strategy)
    def check(case):
        inputs, attrs = case
        _check(name, inputs, attrs)

    check()


@pytest.mark.parametrize("name", sorted(RANDOM_OPS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_random_op(name, dtype):
    b = GraphBuilder()
    out = b.op(name, shape=[256, 64], dtype=dtype, **({"p": 0.25} if name == "dropout_mask"
                                                      else {}))
    g = b.build([out])
    (first,) = run(g, [], rng=np.random.default_rng(0))
    (again,) = run(g, [], rng=np.random.default_rng(0))
    (other,) = run(g, [], rng=np.random.default_rng(1))
    assert first.shape == (256, 64) and first.dtype == dtype.np
    np.testing.assert_array_equal(first, again)  # the generator decides the draw
    assert not np.array_equal(first, other)
    data = first.astype(np.float64)
    if name == "rand":
        assert data.min() >= 0.0 and data.max() < 1.0 and abs(data.mean() - 0.5) < 0.05
    elif name == "dropout_mask":  # 0 or 1 / (1 - p), kept with probability 1 - p
        kept = data[data != 0]
        np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-2)
        assert abs(kept.size / data.size - 0.75) < 0.05
    else:
        assert abs(data.mean()) < 0.1 and abs(data.std() - 1.0) < 0.1


def test_every_op_is_in_spec_ops_md():
    text = (ROOT / "spec" / "ops.md").read_text()
    listed = set(re.findall(r"^\| `(\w+)` \|", text, re.M))
    missing = sorted(op.name for op in all_ops() if op.name not in listed)
    assert missing == [], f"spec/ops.md has no row for: {missing}"
    unknown = sorted(listed - {op.name for op in all_ops()})
    assert unknown == [], f"spec/ops.md lists ops that are not registered: {unknown}"


def test_spec_ops_md_tables_match_the_registry():
    spec = importlib.util.spec_from_file_location("gen_ops", ROOT / "spec" / "gen_ops.py")
    gen_ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_ops)
    text = (ROOT / "spec" / "ops.md").read_text()
    assert gen_ops.render(text) == text, \
        "spec/ops.md is out of date with the registry: run `python spec/gen_ops.py`"


# --- the builder's broadcasting and weak scalars against torch ------------------------------
BROADCAST_OPS = {"add": torch.add, "mul": torch.mul, "maximum": torch.maximum,
                 "div": torch.div, "lt": torch.lt, "sub": torch.sub}


@st.composite
def broadcast_case(draw):
    name = draw(st.sampled_from(sorted(BROADCAST_OPS)))
    # Rank >= 1: torch's zero-dim-tensor promotion rule is the frontend's job (spec/ir.md).
    shapes_ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3,
                                                     max_side=3))
    dtypes = NON_BOOL if name == "sub" else ALL
    a_t, b_t = draw(st.sampled_from(dtypes)), draw(st.sampled_from(dtypes))
    a = draw(arrays(a_t, shapes_.input_shapes[0]))
    if draw(st.booleans()):  # a Python scalar operand: torch's weak promotion applies
        b = draw(st.sampled_from([2, -1.5, True])) if name != "sub" else draw(
            st.sampled_from([2, -1.5]))
    else:
        b = (draw(arrays(b_t, shapes_.input_shapes[1])), b_t)
    return name, (a, a_t), b


@given(broadcast_case())
def test_builder_broadcasting_and_weak_scalars_equal_torch(case):
    name, (a, a_t), b = case
    builder = GraphBuilder()
    x = builder.input("a", TensorType(a_t, a.shape))
    args, torch_args = [a], [to_torch(a, a_t)]
    if isinstance(b, tuple):
        y = builder.input("b", TensorType(b[1], b[0].shape))
        args.append(b[0])
        torch_args.append(to_torch(*b))
    else:
        y = b
        torch_args.append(b)
    out = builder.op(name, x, y)
    (result,) = run(builder.build([out]), args)
    if name == "maximum" and not isinstance(b, tuple):
        torch_args[1] = torch.tensor(b)  # torch.maximum takes tensors only; zero-dim is weak
    expected = BROADCAST_OPS[name](*torch_args)
    assert str(out.type.dtype.torch_name) == str(expected.dtype).removeprefix("torch.")
    assert_close(result, from_torch(expected), out.type.dtype, f"{name} {a.shape} {b!r:.60}")


# --- clear errors for what an op does not accept ----------------------------------------------
REJECTED = [
    ("argmax", [(bool_, (3,))], {}, "not defined for bool"),
    ("matmul", [(bool_, (2, 2)), (bool_, (2, 2))], {}, "not defined for bool"),
    ("matmul", [(f32, (2, 3)), (f32, (2, 3))], {}, "contraction sizes differ"),
    ("clamp", [(f32, (3,))], {}, "at least one of min and max"),
    ("gelu", [(f32, (3,))], {"approximate": "fast"}, "'none' or 'tanh'"),
    ("silu", [(i64, (3,))], {}, "needs floating operands"),
    ("index_select", [(f32, (3,)), (u8, (2,))], {"dim": 0}, "i64 or i32"),
    ("gather", [(f32, (2, 2)), (i64, (3, 2))], {"dim": 1}, "larger than x"),
    ("bitwise_left_shift", [(bool_, (2,)), (bool_, (2,))], {}, "needs integer operands"),
    ("sub", [(bool_, (2,)), (bool_, (2,))], {}, "not defined for bool"),
    ("mean", [(i64, (2,))], {}, "needs a floating input"),
    ("add", [(f32, (2,)), (f32, (3,))], {}, "broadcast explicitly"),
    ("where", [(f32, (2,)), (f32, (2,)), (f32, (2,))], {}, "condition must be bool"),
    ("reshape", [(f32, (2, 3))], {"shape": [4]}, "element counts differ"),
    ("slice", [(f32, (4,))], {"dim": 0, "start": 0, "stop": 4, "step": 0}, "step must be positive"),
]


@pytest.mark.parametrize("name, operands, attrs, message", REJECTED,
                         ids=[f"{r[0]}-{r[3]}" for r in REJECTED])
def test_type_rules_reject_with_a_clear_message(name, operands, attrs, message):
    b = GraphBuilder()
    values = [b.input(f"x{i}", TensorType(dt, shape)) for i, (dt, shape) in enumerate(operands)]
    with pytest.raises(TypeError, match=message):
        b.insert(lookup(name), values, attrs)
