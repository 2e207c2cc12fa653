"""nn.Module calls: built-in module types map to the torch table; user modules inline.

Owns: `call_module` and `MODULE_TABLE` (module type -> handler).  A handler reads
parameters and buffers through `load_attr`, so they become graph inputs with
sources like `L['self'].fc.weight` and are guarded; hyperparameters fixed at
construction (eps, stride, padding...) are read directly and not guarded (see
spec/guards.md, "Deliberately not guarded").  The `training` flag is guarded
wherever it changes what is traced.  Spec: spec/tracer.md, "Modules".
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from refcomp import guards as G
from refcomp.reasons import Unsupported
from refcomp.sources import AttrSource
from refcomp.tracer import calls, torch_table
from refcomp.tracer.values import ConstVar, TensorVar

MODULE_TABLE: dict = {}


def module(*types_):
    def register(fn):
        for t in types_:
            MODULE_TABLE[t] = fn
        return fn
    return register


def _param(tx, mod_vt, name):
    """A parameter or buffer as a symbolic value (None stays None)."""
    if getattr(mod_vt.value, name) is None:
        return ConstVar(None)
    return calls.load_attr(tx, mod_vt, name)


def _training(tx, mod_vt) -> bool:
    m = mod_vt.value
    if mod_vt.source is not None:
        tx.ctx.add_guard(G.EQUALS_MATCH, AttrSource(mod_vt.source, "training"), m.training)
    return m.training


def _torch(tx, fn, args, kwargs=None):
    return torch_table.call_torch(tx.ctx, fn, list(args), dict(kwargs or {}))


def call_module(tx, mod_vt, args, kwargs):
    m = mod_vt.value
    if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or \
            m._backward_pre_hooks or _global_hooks():
        raise Unsupported("RB004", f"{type(m).__name__} has hooks")
    handler = MODULE_TABLE.get(type(m))
    if handler is not None:
        return handler(tx, mod_vt, *args, **kwargs)
    if type(m).__module__.startswith("torch.nn"):
        raise Unsupported("RB004", f"nn.{type(m).__name__} is not in the module table")
    forward = type(m).forward
    return calls.call_function(tx, ConstVar(forward), [mod_vt] + list(args), kwargs)


def _global_hooks() -> bool:
    from torch.nn.modules import module as mm

    return bool(mm._global_forward_hooks or mm._global_forward_pre_hooks
                or mm._global_backward_hooks)


@module(nn.Linear)
def _linear(tx, m, x):
    return _torch(tx, F.linear, [x, _param(tx, m, "weight"), _param(tx, m, "bias")])


@module(nn.Conv2d)
def _conv2d(tx, m, x):
    c = m.value
    if c.padding_mode != "zeros":
        raise Unsupported("RB013", f"Conv2d padding_mode={c.padding_mode!r}")
    return _torch(tx, F.conv2d, [x, _param(tx, m, "weight"), _param(tx, m, "bias"),
                                 ConstVar(c.stride), ConstVar(c.padding),
                                 ConstVar(c.dilation), ConstVar(c.groups)])


@module(nn.BatchNorm1d, nn.BatchNorm2d)
def _batch_norm(tx, m, x):
    bn = m.value
    if _training(tx, m) or not bn.track_running_stats:
        raise Unsupported("RB009", f"{type(bn).__name__} in training mode updates its"
                                   " running statistics")
    return _torch(tx, F.batch_norm, [x, _param(tx, m, "running_mean"),
                                     _param(tx, m, "running_var"), _param(tx, m, "weight"),
                                     _param(tx, m, "bias"), ConstVar(False),
                                     ConstVar(0.0), ConstVar(bn.eps)])


@module(nn.LayerNorm)
def _layer_norm(tx, m, x):
    ln = m.value
    return _torch(tx, F.layer_norm, [x, ConstVar(tuple(ln.normalized_shape)),
                                     _param(tx, m, "weight"), _param(tx, m, "bias"),
                                     ConstVar(ln.eps)])


@module(nn.Embedding)
def _embedding(tx, m, x):
    e = m.value
    if e.max_norm is not None:
        raise Unsupported("RB013", "Embedding(max_norm=...) renormalizes in place")
    return _torch(tx, F.embedding, [x, _param(tx, m, "weight")])


@module(nn.Dropout)
def _dropout(tx, m, x):
    if _training(tx, m) and m.value.p > 0:
        raise Unsupported("RB009", "Dropout in training mode draws its own random mask")
    return x


def _activation(fn, **fixed):
    def handler(tx, m, x):
        kwargs = {k: ConstVar(getattr(m.value, attr)) for k, attr in fixed.items()}
        return _torch(tx, fn, [x], kwargs)
    return handler


MODULE_TABLE[nn.ReLU] = _activation(torch.relu)
MODULE_TABLE[nn.GELU] = _activation(F.gelu, approximate="approximate")
MODULE_TABLE[nn.SiLU] = _activation(F.silu)
MODULE_TABLE[nn.Tanh] = _activation(torch.tanh)
MODULE_TABLE[nn.Sigmoid] = _activation(torch.sigmoid)
MODULE_TABLE[nn.Softmax] = _activation(F.softmax, dim="dim")
MODULE_TABLE[nn.LogSoftmax] = _activation(F.log_softmax, dim="dim")
MODULE_TABLE[nn.LeakyReLU] = _activation(F.leaky_relu, negative_slope="negative_slope")


@module(nn.Identity)
def _identity(tx, m, x, *args, **kwargs):
    return x


@module(nn.Flatten)
def _flatten(tx, m, x):
    return _torch(tx, torch.flatten, [x, ConstVar(m.value.start_dim), ConstVar(m.value.end_dim)])


@module(nn.Sequential)
def _sequential(tx, m, x):
    for child in calls.iterate(tx, m):
        x = calls.call_function(tx, child, [x], {})
    return x


def is_tensor(vt) -> bool:
    return isinstance(vt, TensorVar)
