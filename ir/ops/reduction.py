"""Reductions over a set of dims, with keepdim.  Spec: spec/ops.md, "Reductions".

`dims=[]` means every dim (torch's `dim=None`).  Sums and products of integers and
bools accumulate in i64, as in torch.  Floating sums accumulate in the input dtype
in the reference (numpy uses pairwise summation); backends document their order.
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.registry import REDUCTION, defop
from ir.types import TensorType, bool_, i64

_REDUCE_ATTRS = {"dims": ("ints", ()), "keepdim": ("bool", False)}


def _reduce_infer(dtype_rule):
    def infer(types, dims=(), keepdim=False, **_):
        (x,) = types
        shape = rules.reduced_shape(x.shape, dims, keepdim)
        return TensorType(dtype_rule(x), shape, x.device)
    return infer


def _same(x):
    return x.dtype


def _accumulating(x):
    return i64 if not x.dtype.is_float else x.dtype


def _float_only(x):
    if not x.dtype.is_float:
        raise TypeError(f"needs a floating input, got {x.dtype}")
    return x.dtype


def _axes(x, dims):
    return rules.normalize_dims(dims, x.ndim)


def _np_reduce(fn, acc_int=False):
    def ref(x, dims=(), keepdim=False, **_):
        if acc_int and x.dtype.kind in "biu":
            x = x.astype(np.int64)
        return fn(x, axis=_axes(x, dims), keepdims=keepdim)
    return ref


def _sum_vjp(b, g, out, x, dims=(), keepdim=False):
    axes = rules.normalize_dims(dims, x.type.rank)
    if not keepdim:
        g = b.reshape(g, shape=[1 if i in axes else d for i, d in enumerate(x.type.shape)])
    return (b.expand(g, shape=list(x.type.shape)),)


defop("sum", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_accumulating), ref=_np_reduce(np.sum, acc_int=True),
      vjp=_sum_vjp, doc="sum over dims (ints and bool accumulate in i64)")
defop("prod", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_accumulating), ref=_np_reduce(np.prod, acc_int=True),
      doc="product over dims (ints and bool accumulate in i64)")
defop("amax", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_same), ref=_np_reduce(np.max), doc="max over dims; NaN propagates")
defop("amin", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_same), ref=_np_reduce(np.min), doc="min over dims; NaN propagates")
defop("mean", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(_float_only), ref=_np_reduce(np.mean), doc="arithmetic mean")
defop("any", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(lambda x: bool_), ref=_np_reduce(np.any), doc="any nonzero")
defop("all", REDUCTION, operands=("x",), attrs=_REDUCE_ATTRS,
      infer=_reduce_infer(lambda x: bool_), ref=_np_reduce(np.all), doc="all nonzero")


def _var_ref(x, dims=(), keepdim=False, correction=1):
    return np.var(x, axis=_axes(x, dims), keepdims=keepdim, ddof=correction)


defop("var", REDUCTION, operands=("x",),
      attrs={"dims": ("ints", ()), "keepdim": ("bool", False), "correction": ("int", 1)},
      infer=_reduce_infer(_float_only), ref=_var_ref,
      doc="sum((x - mean)^2) / (N - correction)")


def _arg_infer(types, dim=None, keepdim=False):
    (x,) = types
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
      doc="index of the first maximum (dim=None: of the flattened tensor)")
defop("argmin", REDUCTION, operands=("x",),
      attrs={"dim": ("optint", None), "keepdim": ("bool", False)},
      infer=_arg_infer, ref=_arg_ref(_nan_first(np.argmin)),
      doc="index of the first minimum (dim=None: of the flattened tensor)")
