"""Reductions over a set of dims, with keepdim.  Spec: spec/ops.md, "Reductions".

`dims=[]` means every dim (torch's `dim=None`).  Sums and products of integers and
bools accumulate in i64, as in torch.  Float sums, means and variances accumulate in
f64 in the reference (then round to the result dtype): at least as accurate as ATen's
cascaded sums and double-accumulated var, whatever the axes (numpy sums pairwise only
along a contiguous axis).  Other half-precision reductions compute in f32 (see Note
[Reference precision] in ir/ops/pointwise.py); backends document their order.
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.registry import REDUCTION, RESULT, defop
from ir.types import TensorType, bool_, i64, u8

_REDUCE_ATTRS = {"dims": ("ints", ()), "keepdim": ("bool", False)}


def _reduce_infer(dtype_rule):
    def infer(types, dims=(), keepdim=False, **_):
        (x,) = types
        shape = rules.reduced_shape(x.shape, dims, keepdim)
        return TensorType(dtype_rule(x), shape, x.device)
    infer.__doc__ = f"x's shape without dims (size 1 if keepdim); {dtype_rule.__doc__}"
    return infer


def _same(x):
    """dtype of x."""
    return x.dtype


def _accumulating(x):
    """dtype of x if floating or complex, else i64."""
    return x.dtype if x.dtype.is_inexact else i64


def _float_only(x):
    """dtype of x, which must be floating."""
    if not x.dtype.is_float:
        raise TypeError(f"needs a floating input, got {x.dtype}")
    return x.dtype


def _inexact(x):
    """dtype of x, which must be floating or complex."""
    if not x.dtype.is_inexact:
        raise TypeError(f"needs a floating input, got {x.dtype}")
    return x.dtype


def _truth(x):
    """bool (u8 for a u8 input, as torch keeps)."""
    return x.dtype if x.dtype == u8 else bool_


def _axes(x, dims):
    # A rank-0 tensor accepts dim 0 / -1 (as torch does) and reduces nothing.
    return rules.normalize_dims(dims, x.ndim) if x.ndim else None


def _np_reduce(fn, acc_int=False, wide=False):
    """wide: float sums accumulate in f64 (the interpreter rounds the result to the
    node's dtype): numpy sums pairwise only along a contiguous axis, and one f32
    accumulator per output over the others drifts (spec/ops.md, "Reductions")."""
    def ref(x, dims=(), keepdim=False, **_):
        if acc_int and x.dtype.kind in "biu":
            x = x.astype(np.int64)
        elif wide and x.dtype.kind in "fc":
            x = x.astype(np.float64 if x.dtype.kind == "f" else np.complex128)
        elif x.dtype == np.float16:
            x = x.astype(np.float32)  # accumulate half precision in f32, as torch does
        return fn(x, axis=_axes(x, dims), keepdims=keepdim)
    return ref


# --- VJPs: the gradient of a reduction is broadcast back over the reduced dims ------------
def _reduced_axes(x, dims):
    return rules.normalize_dims(dims, x.type.rank) if x.type.rank else ()


def _back(b, g, x, dims, keepdim):
    """g (the reduction's shape) broadcast to x's shape."""
    axes = _reduced_axes(x, dims)
    if not keepdim:
        g = b.reshape(g, shape=[1 if i in axes else d for i, d in enumerate(x.type.shape)])
    return b.expand(g, shape=list(x.type.shape))


def _count(x, dims) -> int:
    """Number of elements reduced into each result (static sizes only)."""
    n = 1
    for a in _reduced_axes(x, dims):
        n = n * x.type.shape[a]
    if not isinstance(n, int):
        raise NotImplementedError(f"this VJP needs a static reduction size, got {n}")
    return n


def _sum_vjp(b, g, out, x, dims=(), keepdim=False):
    return (_back(b, g, x, dims, keepdim) if x.type.dtype.is_float else None,)


def _mean_vjp(b, g, out, x, dims=(), keepdim=False):
    return (b.div(_back(b, g, x, dims, keepdim), _count(x, dims)),)


def _extremum_vjp(b, g, out, x, dims=(), keepdim=False):
    # torch: the gradient is shared evenly by every element equal to the extremum.
    if not x.type.dtype.is_float:
        return (None,)
    hit = b.eq(x, _back(b, out, x, dims, keepdim))
    count = b.sum(b.cast(hit, dtype=x.type.dtype), dims=list(dims), keepdim=True)
    share = b.div(_back(b, g, x, dims, keepdim), b.expand(count, shape=list(x.type.shape)))
    if dims:
        # amax/amin over dims: ATen's backward multiplies the share by the mask, so a
        # NaN gradient reaches every element (NaN * 0).
        return (b.mul(share, b.cast(hit, dtype=x.type.dtype)),)
    # Over every dim (`x.max()`, the tracer's only full extremum without dims): ATen's
    # evenly_distribute_backward fills the share into the hits only, so the others get
    # exactly 0 (corpus grad_full_min_nan_gradient_eager).  The tracer records
    # `torch.amax(x)` over every dim, named, so it gets the rule above.
    return (b.where(hit, share, 0.0),)


def _prod_vjp(b, g, out, x, dims=(), keepdim=False):
    # d prod / dx_i is the product of the other elements.  With p the product of the
    # nonzero elements and z the number of zeros (per result): out / x_i = p / x_i when
    # z = 0; at the one zero it is p; with two or more zeros every gradient is 0.
    if not x.type.dtype.is_float:
        return (None,)
    zero = b.eq(x, 0.0)
    p = _back(b, b.prod(b.where(zero, 1.0, x), dims=list(dims), keepdim=True), x, dims, True)
    z = _back(b, b.sum(zero, dims=list(dims), keepdim=True), x, dims, True)
    at_zero = b.where(b.eq(z, 1), p, 0.0)
    elsewhere = b.where(b.eq(z, 0), b.div(p, x), 0.0)
    return (b.mul(_back(b, g, x, dims, keepdim), b.where(zero, at_zero, elsewhere)),)


def _var_vjp(b, g, out, x, dims=(), keepdim=False, correction=1):
    # d var / dx = 2 (x - mean) / (N - correction)
    mean = b.expand(b.mean(x, dims=list(dims), keepdim=True), shape=list(x.type.shape))
    centered = b.sub(x, mean)
    n = _count(x, dims)
    grad = _back(b, g, x, dims, keepdim)
    if (x.type.rank == 0 or not dims) and n - correction <= 0:
        # ATen's var_backward for a 0-d input or a reduction without `dim`: grad *
        # where(x == mean, NaN, inf) (corpus grad_var_full_reduction_dof_nonpositive).
        return (b.mul(grad, b.where(b.eq(x, mean), float("nan"), float("inf"))),)
    # With `dim`: 2 / (N - correction), negative when correction > N (a gradient of -0
    # there, not NaN: corpus grad_var_correction_above_count).
    scale = 2.0 / (n - correction) if n != correction else float("inf")
    return (b.mul(b.mul(grad, centered), scale),)


defop("sum", REDUCTION, saves={}, operands=("x",), attrs=_REDUCE_ATTRS, complex=True,
      infer=_reduce_infer(_accumulating), ref=_np_reduce(np.sum, acc_int=True, wide=True),
      vjp=_sum_vjp, doc="sum over dims (ints and bool accumulate in i64); empty sum is 0")
defop("prod", REDUCTION, saves={"x": ("x", RESULT)}, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_accumulating), ref=_np_reduce(np.prod, acc_int=True), vjp=_prod_vjp,
      doc="product over dims (ints and bool accumulate in i64, wrapping); empty product is 1")
defop("amax", REDUCTION, saves={"x": ("x", RESULT)}, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_same), ref=_np_reduce(np.max), vjp=_extremum_vjp,
      doc="max over dims; NaN propagates; an empty reduced dim is an error")
defop("amin", REDUCTION, saves={"x": ("x", RESULT)}, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_same), ref=_np_reduce(np.min), vjp=_extremum_vjp,
      doc="min over dims; NaN propagates; an empty reduced dim is an error")
defop("mean", REDUCTION, saves={}, operands=("x",), attrs=_REDUCE_ATTRS, complex=True,
      infer=_reduce_infer(_inexact), ref=_np_reduce(np.mean, wide=True), vjp=_mean_vjp,
      doc="sum / N over dims; empty mean is NaN")
defop("any", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_truth), ref=_np_reduce(np.any),
      doc="true if any element is nonzero; empty any is false")
defop("all", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_truth), ref=_np_reduce(np.all),
      doc="true if every element is nonzero; empty all is true")


def _var_ref(x, dims=(), keepdim=False, correction=1):
    # Welford's answer, as ATen's CPU var in f64: a two-pass in f64 on the values shifted
    # by their row's first element, exact for equal elements (Note [How ATen computes var]
    # in ir/passes/decompose.py).
    x = x.astype(np.float64)
    axes = _axes(x, dims)
    if axes is not None and x.size:
        x = x - x[tuple(slice(0, 1) if d in axes else slice(None) for d in range(x.ndim))]
    # N - correction <= 0 divides by 0 (inf or NaN), as torch does.
    return np.var(x, axis=axes, keepdims=keepdim, ddof=correction)


defop("var", REDUCTION, saves={"x": ("x",)}, operands=("x",),
      attrs={"dims": ("ints", ()), "keepdim": ("bool", False), "correction": ("int", 1)},
      infer=_reduce_infer(_float_only), ref=_var_ref, vjp=_var_vjp,
      doc="sum((x - mean)^2) / (N - correction), as Welford's algorithm in f64 computes it"
          " (exactly 0 for equal elements); N <= correction divides by zero")


def _arg_infer(types, dim=None, keepdim=False):
    """i64; x's shape without dim (size 1 if keepdim); dim=none: rank 0 (all 1s if keepdim)."""
    (x,) = types
    if x.dtype == bool_:
        raise TypeError("argmax/argmin are not defined for bool tensors")
    if dim is None:
        shape = (1,) * x.rank if keepdim else ()
    else:
        shape = rules.reduced_shape(x.shape, [dim], keepdim)
    return TensorType(i64, shape, x.device)


def _arg_ref(fn):
    def ref(x, dim=None, keepdim=False):
        if dim is None:
            out = np.asarray(fn(x.reshape(-1)), dtype=np.int64)
            return out.reshape((1,) * x.ndim) if keepdim else out
        axis = rules.normalize_dim(dim, x.ndim)
        if x.ndim == 0:
            return np.zeros((), np.int64)
        out = fn(x, axis=axis)
        return np.expand_dims(out, axis) if keepdim else out
    return ref


def _nan_first(fn):
    # torch treats NaN as the extreme value: the index of the first NaN wins.
    def pick(x, axis=None):
        if x.dtype.kind == "f":
            nan = np.isnan(x)
            if nan.any():
                base = fn(np.where(nan, 0, x), axis=axis)
                first_nan = np.argmax(nan, axis=axis)
                return np.where(np.any(nan, axis=axis), first_nan, base)
        return fn(x, axis=axis)
    return pick


defop("argmax", REDUCTION, operands=("x",),
      attrs={"dim": ("optint", None), "keepdim": ("bool", False)},
      infer=_arg_infer, ref=_arg_ref(_nan_first(np.argmax)),
      doc="index of the first maximum (NaN counts as the maximum); dim=none: of the flattened"
          " tensor; an empty reduced dim is an error")
defop("argmin", REDUCTION, operands=("x",),
      attrs={"dim": ("optint", None), "keepdim": ("bool", False)},
      infer=_arg_infer, ref=_arg_ref(_nan_first(np.argmin)),
      doc="index of the first minimum (NaN counts as the minimum); dim=none: of the flattened"
          " tensor; an empty reduced dim is an error")
