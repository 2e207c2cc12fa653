"""Composite ops: what the frontend records for torch's fused-looking functions.

Each has reference semantics here (so graphs containing them run on the
interpreter) and is rewritten into primitives by the `decompose` pass, whose
rules read as the math.  Spec: spec/ops.md, "Composite".
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.pointwise import _one_rounding
from ir.ops.registry import COMPOSITE, RESULT, defop, saves_all
from ir.types import TensorType, bf16, f16, f32


def _float_like(types, **_):
    x = types[0]
    if not x.dtype.is_float:
        raise TypeError(f"needs a floating input, got {x.dtype}")
    return x


def _softmax_infer(types, dim):
    x = _float_like(types)
    rules.normalize_dim(dim, x.rank)
    return x


def _softmax_ref(x, dim):
    axis = rules.normalize_dim(dim, x.ndim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_ref(x, dim):
    axis = rules.normalize_dim(dim, x.ndim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


# --- VJPs: the closed forms (cheaper than differentiating the decomposition) --------------
def _keep(b, v, dims):
    """A keepdim sum of v over dims, expanded back to v's shape."""
    return b.expand(b.sum(v, dims=list(dims), keepdim=True), shape=list(v.type.shape))


def _softmax_vjp(b, g, out, x, dim):
    # dx = y * (g - sum(g * y))
    d = rules.normalize_dim(dim, x.type.rank) if x.type.rank else 0
    dims = [d] if x.type.rank else []
    return (b.mul(out, b.sub(g, _keep(b, b.mul(g, out), dims))),)


def _log_softmax_vjp(b, g, out, x, dim):
    # dx = g - exp(y) * sum(g)
    d = rules.normalize_dim(dim, x.type.rank) if x.type.rank else 0
    dims = [d] if x.type.rank else []
    return (b.sub(g, b.mul(b.exp(out), _keep(b, g, dims))),)


def _normalized(b, x, dims, centre, eps):
    """(x - mean) * rstd and rstd (expanded) over dims; no centring for RMS norm."""
    shape = list(x.type.shape)
    if centre:
        x = b.sub(x, b.expand(b.mean(x, dims=dims, keepdim=True), shape=shape))
    rstd = b.expand(b.rsqrt(b.add(b.mean(b.mul(x, x), dims=dims, keepdim=True), eps)),
                    shape=shape)
    return b.mul(x, rstd), rstd


def _norm_grads(b, g, x, weight, bias, normalized_ndim, eps, centre):
    rank = x.type.rank
    inner = list(range(rank - normalized_ndim, rank))
    outer = list(range(rank - normalized_ndim))
    xhat, rstd = _normalized(b, x, inner, centre, eps)
    gw = b.reshape(b.sum(b.mul(g, xhat), dims=outer), shape=list(weight.type.shape)) \
        if outer else b.mul(g, xhat)
    ghat = b.mul(g, b.broadcast_to(weight, x.type.shape))
    n = 1
    for d in inner:
        n = n * x.type.shape[d]
    # dx = rstd * (ghat - mean(ghat) - xhat * mean(ghat * xhat)); RMS norm drops mean(ghat).
    proj = b.mul(xhat, b.div(_keep(b, b.mul(ghat, xhat), inner), n))
    inner_g = b.sub(ghat, proj)
    if centre:
        inner_g = b.sub(inner_g, b.div(_keep(b, ghat, inner), n))
    gx = b.mul(rstd, inner_g)
    if bias is None:
        return gx, gw
    gb = b.reshape(b.sum(g, dims=outer), shape=list(bias.type.shape)) if outer else g
    return gx, gw, gb


# ATen's (log_)softmax backward of a half-typed output is one kernel that computes in f32
# and rounds once (spec/autograd.md, "Autocast").
defop("softmax", COMPOSITE, saves={"x": (RESULT,)}, operands=("x",), attrs={"dim": "int"},
      infer=_softmax_infer, ref=_softmax_ref, vjp=_one_rounding(_softmax_vjp),
      doc="exp(x - max) / sum(exp(x - max)) along dim")
defop("log_softmax", COMPOSITE, saves={"x": (RESULT,)}, operands=("x",), attrs={"dim": "int"},
      infer=_softmax_infer, ref=_log_softmax_ref, vjp=_one_rounding(_log_softmax_vjp),
      doc="(x - max) - log(sum(exp(x - max))) along dim")


def _norm_infer(types, normalized_ndim, eps):
    x, weight, bias = types
    _float_like(types)
    if not 1 <= normalized_ndim <= x.rank:
        raise TypeError(f"normalized_ndim {normalized_ndim} out of range for {x}")
    tail = x.shape[x.rank - normalized_ndim:]
    for t in (weight, bias):
        if t.shape != tail:
            raise TypeError(f"layer_norm weight/bias must have shape {list(tail)}, got {t}")
    return x


def _layer_norm_ref(x, weight, bias, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _in_opmath(vjp):
    """`vjp` as ATen's norm backward computes a half-precision input (one kernel, in f32,
    "opmath"): every operand in f32, each gradient rounded once to its operand's dtype, so
    a float32 weight's gradient (the mixed-type kernel: autocast's bf16 activation, f32
    parameters) is never rounded to the half type (spec/autograd.md, "Autocast")."""
    def rule(b, g, out, x, *params, **attrs):
        if x.type.dtype not in (f16, bf16):
            return vjp(b, g, out, x, *params, **attrs)
        wide = [b.cast(v, dtype=f32) if v.type.dtype in (f16, bf16) else v
                for v in (g, x, *params)]
        grads = vjp(b, wide[0], out, *wide[1:], **attrs)
        return tuple(d if d is None or d.type.dtype == v.type.dtype else
                     b.cast(d, dtype=v.type.dtype) for d, v in zip(grads, (x, *params)))
    return rule


defop("layer_norm", COMPOSITE, operands=("x", "weight", "bias"),
      saves=saves_all(("x", "weight", "bias"), ("x", "weight", "bias")),
      attrs={"normalized_ndim": "int", "eps": ("float", 1e-5)},
      infer=_norm_infer, ref=_layer_norm_ref,
      vjp=_in_opmath(lambda b, g, out, x, w, bias, normalized_ndim, eps: _norm_grads(
          b, g, x, w, bias, normalized_ndim, eps, centre=True)),
      doc="(x - mean) / sqrt(biased var + eps) * weight + bias over the last normalized_ndim dims")


def _rms_norm_infer(types, normalized_ndim, eps):
    x, weight = types
    return _norm_infer([x, weight, weight], normalized_ndim, eps)


def _rms_norm_ref(x, weight, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    return x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps) * weight


defop("rms_norm", COMPOSITE, operands=("x", "weight"),
      saves=saves_all(("x", "weight"), ("x", "weight")),
      attrs={"normalized_ndim": "int", "eps": ("float", 1e-6)},
      infer=_rms_norm_infer, ref=_rms_norm_ref,
      vjp=_in_opmath(lambda b, g, out, x, w, normalized_ndim, eps: _norm_grads(
          b, g, x, w, None, normalized_ndim, eps, centre=False)),
      doc="x / sqrt(mean(x^2) + eps) * weight over the last normalized_ndim dims")


def _batch_norm_infer(types, eps):
    x, mean, var, weight, bias = types
    _float_like(types)
    if x.rank < 2:
        raise TypeError(f"batch_norm needs rank >= 2 (N, C, ...), got {x}")
    for t in (mean, var, weight, bias):
        if t.shape != (x.shape[1],):
            raise TypeError(f"batch_norm statistics must have shape [{x.shape[1]}], got {t}")
    return TensorType(x.dtype, x.shape, x.device)


def _batch_norm_vjp(b, g, out, x, mean, var, weight, bias, eps):
    # y = (x - mean) * s + bias with s = weight * rstd, rstd = (var + eps)^-1/2, per channel.
    shape = list(x.type.shape)
    stats = [d for d in range(x.type.rank) if d != 1]

    def per_channel(v):  # [C] -> x's shape
        return b.expand(b.reshape(v, shape=[1, shape[1]] + [1] * (len(shape) - 2)), shape=shape)

    rstd = b.rsqrt(b.add(var, eps))
    gsum = b.sum(g, dims=stats)
    centred_g = b.sum(b.mul(g, b.sub(x, per_channel(mean))), dims=stats)
    gx = b.mul(g, per_channel(b.mul(weight, rstd)))
    gmean = b.neg(b.mul(gsum, b.mul(weight, rstd)))
    # d rstd / d var = -rstd^3 / 2
    gvar = b.mul(b.mul(centred_g, weight), b.mul(-0.5, b.mul(rstd, b.mul(rstd, rstd))))
    return gx, gmean, gvar, b.mul(centred_g, rstd), gsum


def _batch_norm_ref(x, mean, var, weight, bias, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = weight / np.sqrt(var + eps)
    return (x - mean.reshape(shape)) * scale.reshape(shape) + bias.reshape(shape)


defop("batch_norm", COMPOSITE, operands=("x", "mean", "var", "weight", "bias"),
      saves=saves_all(("x", "mean", "var", "weight", "bias"), ("x", "mean", "var", "weight")),
      attrs={"eps": ("float", 1e-5)}, infer=_batch_norm_infer, ref=_batch_norm_ref,
      vjp=_batch_norm_vjp,
      doc="inference-mode batch norm over channel dim 1 with running statistics")
