"""Composite ops: what the frontend records for torch's fused-looking functions.

Each has reference semantics here (so graphs containing them run on the
interpreter) and is rewritten into primitives by the `decompose` pass, whose
rules read as the math.  Spec: spec/ops.md, "Composite".
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.registry import COMPOSITE, defop
from ir.types import TensorType


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


defop("softmax", COMPOSITE, operands=("x",), attrs={"dim": "int"},
      infer=_softmax_infer, ref=_softmax_ref, doc="exp(x - max) / sum(exp(x - max)) along dim")
defop("log_softmax", COMPOSITE, operands=("x",), attrs={"dim": "int"},
      infer=_softmax_infer, ref=_log_softmax_ref,
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


defop("layer_norm", COMPOSITE, operands=("x", "weight", "bias"),
      attrs={"normalized_ndim": "int", "eps": ("float", 1e-5)},
      infer=_norm_infer, ref=_layer_norm_ref,
      doc="(x - mean) / sqrt(biased var + eps) * weight + bias over the last normalized_ndim dims")


def _rms_norm_infer(types, normalized_ndim, eps):
    x, weight = types
    return _norm_infer([x, weight, weight], normalized_ndim, eps)


def _rms_norm_ref(x, weight, normalized_ndim, eps):
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    return x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps) * weight


defop("rms_norm", COMPOSITE, operands=("x", "weight"),
      attrs={"normalized_ndim": "int", "eps": ("float", 1e-6)},
      infer=_rms_norm_infer, ref=_rms_norm_ref,
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


def _batch_norm_ref(x, mean, var, weight, bias, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = weight / np.sqrt(var + eps)
    return (x - mean.reshape(shape)) * scale.reshape(shape) + bias.reshape(shape)


defop("batch_norm", COMPOSITE, operands=("x", "mean", "var", "weight", "bias"),
      attrs={"eps": ("float", 1e-5)}, infer=_batch_norm_infer, ref=_batch_norm_ref,
      doc="inference-mode batch norm over channel dim 1 with running statistics")
