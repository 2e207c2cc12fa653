"""nn.Module calls: built-in module types map to the torch table; user modules inline.

Owns: `call_module` and `MODULE_TABLE` (module type -> handler).  A handler reads
parameters and buffers through `load_attr`, so they become graph inputs with
sources like `L['self'].fc.weight` and are guarded; every other attribute a
handler reads (eps, stride, padding, dim, negative_slope...) goes through `_hyper`,
which guards its value.  The `training` flag is guarded wherever it changes what is
traced.  A module whose instance sets `forward` is called through that attribute, as
`Module.__call__` does; otherwise the absence of an instance `forward` is guarded.
Spec: spec/tracer.md, "Modules"; spec/guards.md.
"""

from __future__ import annotations

import inspect
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

from refcomp import guards as G
from refcomp.distributed import has_distributed_hooks
from refcomp.reasons import (
    INEXPRESSIBLE_OP,
    TRACE_EXCEPTION,
    TRAINING_MODE_STATE,
    UNSUPPORTED_CALL,
    Unsupported,
)
from refcomp.sources import AttrSource, DictOfSource, ItemSource
from refcomp.tracer import attributes, containers, torch_ops, torch_table
from refcomp.tracer.values import ConstVar, DictVar, ListVar, TensorVar, TupleVar

MODULE_TABLE: dict = {}


def module(*types_):
    def register(fn):
        for t in types_:
            MODULE_TABLE[t] = fn
        return fn
    return register


def _param(tx, mod_vt, name):
    """A parameter or buffer as a symbolic value (None stays None; guarded either way)."""
    if getattr(mod_vt.value, name) is None and mod_vt.source is None:
        return ConstVar(None)
    return tx.load_attr(mod_vt, name)


def _hyper(tx, mod_vt, name):
    """A hyperparameter a handler reads (eps, stride, dim...): its value, guarded."""
    value = getattr(mod_vt.value, name)
    if mod_vt.source is not None:
        tx.ctx.add_guard(G.EQUALS_MATCH, AttrSource(mod_vt.source, name), value)
    return value


def _training(tx, mod_vt) -> bool:
    m = mod_vt.value
    if mod_vt.source is not None:
        tx.ctx.add_guard(G.EQUALS_MATCH, AttrSource(mod_vt.source, "training"), m.training)
    return m.training


def _torch(tx, fn, args, kwargs=None):
    return torch_table.call_torch(tx.ctx, fn, list(args), dict(kwargs or {}))


def call_module(tx, mod_vt, args, kwargs):
    m = mod_vt.value
    if has_distributed_hooks(m):
        err = Unsupported(UNSUPPORTED_CALL, f"{type(m).__name__} has hooks of"
                          " torch.distributed (FSDP2): they run eagerly, its forward is"
                          " compiled as a frame of its own")
        err.in_callee = True
        raise err
    if m._backward_hooks or m._backward_pre_hooks or _global_hooks():
        raise Unsupported(UNSUPPORTED_CALL, f"{type(m).__name__} has backward or global hooks")
    if m._forward_hooks or m._forward_pre_hooks:
        return _call_with_forward_hooks(tx, mod_vt, list(args), dict(kwargs))
    # A hook registered after compiling (on this module, or globally) changes what the
    # call runs: guarded, so the call recompiles instead of returning the hook-less result.
    tx.ctx.guard_no_hooks(mod_vt.source)
    return _call_forward(tx, mod_vt, args, kwargs)


# Note [Forward hooks traced]: a module's forward pre-hooks and forward hooks (activation
# logging, FSDP2's fully_shard, Segformer's) are Python functions that Module.__call__
# runs around forward; they are traced here in its order and with its rules (a pre-hook's
# non-None result replaces the arguments, a 1-tuple when it is not a tuple; a hook's
# non-None result replaces the output; `with_kwargs` hooks also take and return the
# keyword arguments).  Guarded: the exact hooks of each dict, in order (their ids, and each
# hook by identity like any function the trace calls), which of them take kwargs, that the
# backward hook dicts stay empty and that no global hook appears; a backward or global hook
# is still a break (RB004).
_PRE, _POST = "_forward_pre_hooks", "_forward_hooks"


def _call_with_forward_hooks(tx, mod_vt, args: list, kwargs: dict):
    m = mod_vt.value
    if mod_vt.source is None:
        raise Unsupported(UNSUPPORTED_CALL, f"hooks of a {type(m).__name__} made in the frame")
    tx.ctx.add_guard(G.NO_GLOBAL_HOOKS, None, None)
    for name in ("_backward_hooks", "_backward_pre_hooks"):
        _guard_hook_keys(tx, mod_vt, name)
    args_vt, kwargs_vt = TupleVar(args), DictVar(kwargs)
    for hook, with_kwargs in _hooks(tx, mod_vt, _PRE):
        if with_kwargs:
            result = tx.call_function(hook, [mod_vt, args_vt, kwargs_vt], {})
            if not _is_none(result):
                if not (isinstance(result, TupleVar) and len(result.items) == 2):
                    raise Unsupported(UNSUPPORTED_CALL, "a forward pre-hook with kwargs"
                                      " returned other than (args, kwargs)")
                args_vt, kwargs_vt = result.items
        else:
            result = tx.call_function(hook, [mod_vt, args_vt], {})
            if not _is_none(result):
                args_vt = result if isinstance(result, TupleVar) else TupleVar([result])
    if not isinstance(args_vt, TupleVar) or not isinstance(kwargs_vt, DictVar):
        raise Unsupported(UNSUPPORTED_CALL, "a forward pre-hook returned arguments the trace"
                          " cannot unpack")
    out = _call_forward(tx, mod_vt, list(args_vt.items), dict(kwargs_vt.items))
    for hook, with_kwargs in _hooks(tx, mod_vt, _POST):
        operands = [mod_vt, args_vt, kwargs_vt, out] if with_kwargs else [mod_vt, args_vt, out]
        result = tx.call_function(hook, operands, {})
        if not _is_none(result):
            out = result
    return out


def _is_none(vt) -> bool:
    return isinstance(vt, ConstVar) and vt.value is None


def _hook_dict_source(mod_vt, name):
    return ItemSource(DictOfSource(mod_vt.source), name)


def _guard_hook_keys(tx, mod_vt, name):
    hooks = mod_vt.value.__dict__[name]
    tx.ctx.add_guard(G.DICT_KEYS, _hook_dict_source(mod_vt, name), (type(hooks), tuple(hooks)))


def _hooks(tx, mod_vt, name) -> list:
    """(hook VT, takes kwargs) for each hook of dict `name`, in order, guarded."""
    m = mod_vt.value
    hooks = m.__dict__[name]
    _guard_hook_keys(tx, mod_vt, name)
    with_kwargs = name + "_with_kwargs"
    _guard_hook_keys(tx, mod_vt, with_kwargs)
    if name == _POST:
        _guard_hook_keys(tx, mod_vt, "_forward_hooks_always_called")
    source = _hook_dict_source(mod_vt, name)
    return [(tx.ctx.wrap(hook, ItemSource(source, hook_id)), hook_id in m.__dict__[with_kwargs])
            for hook_id, hook in hooks.items()]


def _call_forward(tx, mod_vt, args, kwargs):
    """What Module.__call__ runs between the hooks: the instance's forward, the module
    table's handler, or the class's forward, inlined."""
    m = mod_vt.value
    override = m.__dict__.get("forward")
    if override is not None:  # an instance-level forward: what Module.__call__ runs
        fwd = tx.ctx.wrap(override, AttrSource(mod_vt.source, "forward")) \
            if mod_vt.source is not None else ConstVar(override)
        return tx.call_function(fwd, list(args), kwargs)
    tx.ctx.guard_not_overridden(mod_vt.source, "forward")
    handler = MODULE_TABLE.get(type(m))
    if handler is not None:
        if kwargs:  # `seq(input=x)`: the handler's parameters are forward's by position
            args, kwargs = _positional(type(m).forward, m, args, kwargs)
        return handler(tx, mod_vt, *args, **kwargs)
    # Any other module (torch.nn's own included) runs its forward inlined.
    forward = attributes.class_attr(tx, mod_vt, "forward", type(m).forward)
    return tx.call_function(forward, [mod_vt] + list(args), kwargs)


def _positional(forward, m, args, kwargs):
    """Keyword arguments of forward's positional parameters as positional ones (a
    module table handler names its parameters its own way); the rest stay keywords."""
    try:
        bound = inspect.signature(forward).bind(m, *args, **kwargs)
    except TypeError as e:  # eager raises it too
        raise Unsupported(TRACE_EXCEPTION, f"{type(m).__name__}.forward: {e}") from None
    return list(bound.args[1:]), dict(bound.kwargs)


def overrides_call(cls) -> bool:
    """Does `cls` (a user's module class, not torch's own: GraphModule's `__call__` runs
    its forward) override `Module.__call__` in Python, so that `m(...)` runs that?"""
    call = cls.__call__
    return call is not torch.nn.Module.__call__ and isinstance(call, types.FunctionType) \
        and not (call.__module__ or "").startswith("torch.")


def has_hooks(m) -> bool:
    """Would `m(...)` run any forward/backward hook of its own or a global one?"""
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or
                m._backward_pre_hooks or _global_hooks())


def _global_hooks() -> bool:
    from torch.nn.modules import module as mm

    return bool(mm._global_forward_hooks or mm._global_forward_pre_hooks
                or mm._global_backward_hooks or mm._global_backward_pre_hooks)


@module(nn.Linear)
def _linear(tx, m, x):
    return _torch(tx, F.linear, [x, _param(tx, m, "weight"), _param(tx, m, "bias")])


@module(nn.Conv2d)
def _conv2d(tx, m, x):
    padding_mode = _hyper(tx, m, "padding_mode")
    if padding_mode != "zeros":
        raise Unsupported(INEXPRESSIBLE_OP, f"Conv2d padding_mode={padding_mode!r}")
    return _torch(tx, F.conv2d, [x, _param(tx, m, "weight"), _param(tx, m, "bias")] + [
        ConstVar(_hyper(tx, m, k)) for k in ("stride", "padding", "dilation", "groups")])


@module(nn.BatchNorm1d, nn.BatchNorm2d)
def _batch_norm(tx, m, x):
    bn = m.value
    tracking = _hyper(tx, m, "track_running_stats")
    if _training(tx, m):
        # BatchNorm.forward in training mode: count the batch, then normalize with the
        # batch's statistics and update the running ones (torch_ops._batch_stats).
        momentum = _hyper(tx, m, "momentum")
        average = momentum or 0.0
        if tracking:
            count = _torch(tx, torch.Tensor.add_, [_param(tx, m, "num_batches_tracked"),
                                                  ConstVar(1)])
            if momentum is None:  # eager: factor 1.0 / float(num_batches_tracked)
                average = torch_ops.CumulativeAverage(count.value)
        stats = [_param(tx, m, "running_mean"), _param(tx, m, "running_var")] \
            if tracking else [ConstVar(None), ConstVar(None)]
        return _torch(tx, F.batch_norm, [x, *stats, _param(tx, m, "weight"),
                                         _param(tx, m, "bias"), ConstVar(True),
                                         ConstVar(average),
                                         ConstVar(_hyper(tx, m, "eps"))])
    if not tracking:
        raise Unsupported(TRAINING_MODE_STATE,
                          f"{type(bn).__name__} without running statistics uses"
                                   " batch statistics in eval mode")
    return _torch(tx, F.batch_norm, [x, _param(tx, m, "running_mean"),
                                     _param(tx, m, "running_var"), _param(tx, m, "weight"),
                                     _param(tx, m, "bias"), ConstVar(False),
                                     ConstVar(0.0), ConstVar(_hyper(tx, m, "eps"))])


@module(nn.LayerNorm)
def _layer_norm(tx, m, x):
    return _torch(tx, F.layer_norm, [x, ConstVar(tuple(_hyper(tx, m, "normalized_shape"))),
                                     _param(tx, m, "weight"), _param(tx, m, "bias"),
                                     ConstVar(_hyper(tx, m, "eps"))])


@module(nn.Embedding)
def _embedding(tx, m, x):
    if _hyper(tx, m, "max_norm") is not None:
        raise Unsupported(INEXPRESSIBLE_OP, "Embedding(max_norm=...) renormalizes in place")
    return _torch(tx, F.embedding, [x, _param(tx, m, "weight")])


@module(nn.Dropout)
def _dropout(tx, m, x):
    p = _hyper(tx, m, "p")
    if _training(tx, m) and p > 0:
        return _torch(tx, F.dropout, [x, ConstVar(p), ConstVar(True),
                                      ConstVar(_hyper(tx, m, "inplace"))])
    return x


def _activation(fn, **fixed):
    def handler(tx, m, x):
        kwargs = {k: ConstVar(_hyper(tx, m, attr)) for k, attr in fixed.items()}
        return _torch(tx, fn, [x], kwargs)
    return handler


def _inplace_activation(fn, inplace_fn, **fixed):
    """`nn.ReLU(inplace=True)` writes its input (a caller may read it after): traced as the
    in-place op, with its aliasing checks and writes through views; `inplace_fn` None
    passes the flag to `fn` (whose entry breaks on it).  `fixed` as for _activation."""
    def handler(tx, m, x):
        kwargs = {k: ConstVar(_hyper(tx, m, attr)) for k, attr in fixed.items()}
        if not _hyper(tx, m, "inplace"):
            return _torch(tx, fn, [x], kwargs)
        if inplace_fn is None:
            return _torch(tx, fn, [x], {**kwargs, "inplace": ConstVar(True)})
        return _torch(tx, inplace_fn, [x], kwargs)
    return handler


MODULE_TABLE[nn.ReLU] = _inplace_activation(torch.relu, torch.relu_)
MODULE_TABLE[nn.GELU] = _activation(F.gelu, approximate="approximate")
MODULE_TABLE[nn.SiLU] = _inplace_activation(F.silu, None)
MODULE_TABLE[nn.Tanh] = _activation(torch.tanh)
MODULE_TABLE[nn.Sigmoid] = _activation(torch.sigmoid)
MODULE_TABLE[nn.Softmax] = _activation(F.softmax, dim="dim")
MODULE_TABLE[nn.LogSoftmax] = _activation(F.log_softmax, dim="dim")
MODULE_TABLE[nn.LeakyReLU] = _inplace_activation(F.leaky_relu, None,
                                                 negative_slope="negative_slope")


@module(nn.Identity)
def _identity(tx, m, x, *args, **kwargs):
    return x


@module(nn.Flatten)
def _flatten(tx, m, x):
    return _torch(tx, torch.flatten, [x, ConstVar(_hyper(tx, m, "start_dim")),
                                      ConstVar(_hyper(tx, m, "end_dim"))])


@module(nn.MaxPool2d)
def _max_pool2d(tx, m, x):
    return _torch(tx, F.max_pool2d, [x] + [ConstVar(_hyper(tx, m, k)) for k in (
        "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")])


@module(nn.AvgPool2d)
def _avg_pool2d(tx, m, x):
    return _torch(tx, F.avg_pool2d, [x] + [ConstVar(_hyper(tx, m, k)) for k in (
        "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
        "divisor_override")])


@module(nn.AdaptiveAvgPool2d)
def _adaptive_avg_pool2d(tx, m, x):
    return _torch(tx, F.adaptive_avg_pool2d, [x, ConstVar(_hyper(tx, m, "output_size"))])


@module(nn.Sequential)
def _sequential(tx, m, x):
    for child in containers.iterate(tx, m):
        x = tx.call_function(child, [x], {})
    return x


def _causal_hint_with_mask(mask, is_causal) -> bool:
    """`is_causal=True` next to a mask is a hint that the mask is causal: torch's fused eval
    paths apply the mask itself (its slow paths apply a causal mask instead: equal for a
    true hint, and torch documents a false hint as undefined), so the mask is applied."""
    has_mask = mask is not None and not (isinstance(mask, ConstVar) and mask.value is None)
    return has_mask and isinstance(is_causal, ConstVar) and is_causal.value is True


@module(nn.MultiheadAttention)
def _multihead_attention(tx, m, query, key, value, key_padding_mask=None, need_weights=None,
                         attn_mask=None, average_attn_weights=None, is_causal=None):
    # eager's dropout of the attention weights (F.multi_head_attention_forward's, or that
    # of the math path of scaled_dot_product_attention: the same draw, after the softmax)
    dropout_p = float(_hyper(tx, m, "dropout")) if _training(tx, m) else 0.0
    if not isinstance(_param(tx, m, "bias_k"), ConstVar) or _hyper(tx, m, "add_zero_attn"):
        raise Unsupported(INEXPRESSIBLE_OP, "MultiheadAttention with add_bias_kv or add_zero_attn")
    if _causal_hint_with_mask(attn_mask, is_causal):
        is_causal = None  # the mask is applied: See _causal_hint_with_mask
    if is_causal is not None and not (isinstance(is_causal, ConstVar) and
                                      is_causal.value in (None, False)):
        raise Unsupported(INEXPRESSIBLE_OP, "MultiheadAttention(is_causal=...)")
    fast = _mha_fast_path(tx, m, query, key, value, attn_mask, key_padding_mask)
    if fast and not (key_padding_mask is None or isinstance(key_padding_mask, ConstVar)):
        # the native kernel's masked softmax of a padded row is not modelled
        raise Unsupported(INEXPRESSIBLE_OP, "MultiheadAttention(key_padding_mask=...) on torch's"
                                   " native fast path")
    kwargs = {"key_padding_mask": key_padding_mask or ConstVar(None),
              "need_weights": need_weights or ConstVar(True),
              "attn_mask": attn_mask or ConstVar(None),
              "average_attn_weights": average_attn_weights or ConstVar(True),
              "fast_path": ConstVar(fast), "dropout_p": ConstVar(dropout_p)}
    # The decomposition is plain Python over torch ops, traced (inlined) like user code.
    return tx.call_function(ConstVar(mha_forward), [m, query, key, value], kwargs)


def _mha_fast_path(tx, m, query, key, value, attn_mask, key_padding_mask=None) -> bool:
    """Whether eager's MultiheadAttention.forward takes its native fast path (its
    conditions, in torch 2.13's order; every fact read is guarded, but for
    torch.backends.mha's flag).  The two paths differ on a row whose mask hides every key:
    the native path's softmax gives NaN, the path through scaled_dot_product_attention
    (need_weights=False) 0."""
    if any(is_tensor(mk) and mk.meta.is_floating_point() for mk in (attn_mask,
                                                                   key_padding_mask)):
        return False
    if not torch.backends.mha.get_fastpath_enabled() or not is_tensor(query) or \
            query.meta.dim() != 3 or query is not key or key is not value:
        return False
    w, b = _param(tx, m, "in_proj_weight"), _param(tx, m, "in_proj_bias")
    if not (is_tensor(w) and is_tensor(b)) or \
            not query.meta.dtype == w.meta.dtype == b.meta.dtype:
        return False
    if _training(tx, m) or _hyper(tx, m, "num_heads") % 2 or \
            not _hyper(tx, m, "batch_first") or torch.is_autocast_enabled():
        return False
    out = tx.load_attr(m, "out_proj")
    params = [query, w, b, _param(tx, out, "weight"), _param(tx, out, "bias")]
    return not (tx.ctx.grad_enabled and any(is_tensor(p) and p.requires_grad
                                            for p in params))


def mha_forward(mha, query, key, value, need_weights=True, attn_mask=None,
                average_attn_weights=True, fast_path=False, key_padding_mask=None,
                dropout_p=0.0):
    """nn.MultiheadAttention.forward (no bias_k/v), as torch computes it when
    need_weights=True: dropout(softmax(q k^T / sqrt(d) + mask)) v, then out_proj."""
    if query.dim() != 3:
        raise ValueError("unbatched MultiheadAttention input")
    if not (need_weights or fast_path) and mha._qkv_same_embed_dim:
        # in half precision eager calls scaled_dot_product_attention (See _mha_sdpa)
        q, k, v = _in_projection(mha, query, key, value)
        if q.dtype in (torch.float16, torch.bfloat16):
            return _mha_sdpa(mha, q, k, v, attn_mask, key_padding_mask, dropout_p, query.dtype)
    if not mha.batch_first:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    n, tgt, e = query.shape
    src = key.shape[1]
    h = mha.num_heads
    d = e // h
    if mha._qkv_same_embed_dim:
        wq, wk, wv = mha.in_proj_weight[:e], mha.in_proj_weight[e:2 * e], \
            mha.in_proj_weight[2 * e:]
    else:
        wq, wk, wv = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
    bq = bk = bv = None
    if mha.in_proj_bias is not None:
        bq, bk, bv = mha.in_proj_bias[:e], mha.in_proj_bias[e:2 * e], mha.in_proj_bias[2 * e:]
    q = F.linear(query, wq, bq).reshape(n, tgt, h, d).transpose(1, 2)
    k = F.linear(key, wk, bk).reshape(n, src, h, d).transpose(1, 2)
    v = F.linear(value, wv, bv).reshape(n, src, h, d).transpose(1, 2)
    scores = (q * (1.0 / d) ** 0.5) @ k.transpose(-2, -1)
    if key_padding_mask is not None:  # added to the mask first, as eager's slow path does
        pad = key_padding_mask.view(n, 1, 1, src)
        if pad.dtype == torch.bool:
            pad = torch.zeros_like(pad, dtype=scores.dtype).masked_fill(pad, float("-inf"))
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            attn_mask = torch.zeros_like(attn_mask, dtype=scores.dtype).masked_fill(
                attn_mask, float("-inf"))
        attn_mask = pad if attn_mask is None else attn_mask + pad
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if not (need_weights or fast_path):  # scaled_dot_product_attention's safe softmax: a
        # row that masks every key attends to nothing (0), where the others give NaN
        weights = torch.where((scores == float("-inf")).all(dim=-1, keepdim=True), 0.0,
                              weights)
    if dropout_p > 0:  # training: the weights returned are the dropped ones, as eager's
        weights = F.dropout(weights, dropout_p)
    if fast_path:  # the native kernel's result: batch-first, contiguous
        out = (weights @ v).transpose(1, 2).reshape(n, tgt, e)
        out = F.linear(out, mha.out_proj.weight, mha.out_proj.bias)
    else:  # eager's slow path: (tgt, n, e) contiguous, a transposed view when batch_first
        # (a later dropout draws its mask in that memory order)
        out = (weights @ v).permute(2, 0, 1, 3).reshape(tgt * n, e)
        out = F.linear(out, mha.out_proj.weight, mha.out_proj.bias).view(tgt, n, e)
    if mha.batch_first != fast_path:
        out = out.transpose(0, 1)
    if not need_weights:
        return out, None
    return out, weights.mean(dim=1) if average_attn_weights else weights


def _in_projection(mha, query, key, value):
    """q, k, v as eager's in_projection_packed makes them, each (length, n, e): a shared
    input is projected once with the packed weight (one GEMM, so its gradient is one
    GEMM's, not a sum of three), k and v of the same memory with their two thirds."""
    same_kv, same_qk = key is value, query is key
    if mha.batch_first:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    w, b, e = mha.in_proj_weight, mha.in_proj_bias, query.shape[-1]

    def packed(x, w, b, parts):
        proj = F.linear(x, w, b).unflatten(-1, (parts, e))
        proj = proj.unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        return [proj[i] for i in range(parts)]
    if same_kv and same_qk:
        return packed(query, w, b, 3)
    if same_kv:
        bq, bkv = (None, None) if b is None else b.split([e, 2 * e])
        wq, wkv = w.split([e, 2 * e])
        return [F.linear(query, wq, bq)] + packed(key, wkv, bkv, 2)
    bs = (None, None, None) if b is None else b.chunk(3)
    return [F.linear(x, wi, bi) for x, wi, bi in zip((query, key, value), w.chunk(3), bs)]


def _mha_sdpa(mha, q, k, v, attn_mask, key_padding_mask, dropout_p, mask_dtype):
    """need_weights=False in half precision (autocast), as eager's
    F.multi_head_attention_forward computes it: q (tgt, n, e), k and v (src, n, e) from
    `_in_projection`, then scaled_dot_product_attention, whose f16/bf16 CPU kernel (flash
    attention: blocked, online softmax) mha_forward's math does not reproduce bitwise; the
    call stays ATen's (spec/autograd.md, "Autocast").  Masks as eager's: a bool mask (True
    hides) as -inf in the query's dtype, the key padding mask added per batch and head."""
    tgt, n, e = q.shape
    src, h = k.shape[0], mha.num_heads
    d = e // h
    q = q.view(tgt, n * h, d).transpose(0, 1).view(n, h, tgt, d)
    k, v = (t.view(src, n * h, d).transpose(0, 1).view(n, h, src, d) for t in (k, v))

    def canonical(mask):
        if mask is not None and mask.dtype == torch.bool:
            return torch.zeros_like(mask, dtype=mask_dtype).masked_fill(mask, float("-inf"))
        return mask
    attn_mask, key_padding_mask = canonical(attn_mask), canonical(key_padding_mask)
    if attn_mask is not None and attn_mask.dim() == 2:
        attn_mask = attn_mask.unsqueeze(0)
    if key_padding_mask is not None:
        pad = key_padding_mask.view(n, 1, 1, src).expand(-1, h, -1, -1).reshape(n * h, 1, src)
        attn_mask = pad if attn_mask is None else attn_mask + pad
    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else \
            attn_mask.view(n, h, -1, src)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p)
    out = out.permute(2, 0, 1, 3).contiguous().view(n * tgt, e)
    out = F.linear(out, mha.out_proj.weight, mha.out_proj.bias).view(tgt, n, e)
    return (out.transpose(0, 1) if mha.batch_first else out), None


@module(nn.TransformerEncoderLayer)
def _transformer_encoder_layer(tx, m, src, src_mask=None, src_key_padding_mask=None,
                               is_causal=None):
    if _causal_hint_with_mask(src_mask, is_causal):
        is_causal = None
    if is_causal is not None and not (isinstance(is_causal, ConstVar) and
                                      is_causal.value in (None, False)):
        raise Unsupported(INEXPRESSIBLE_OP, "TransformerEncoderLayer(is_causal=...)")
    pad = src_key_padding_mask
    if isinstance(pad, ConstVar) and pad.value is None:
        pad = None
    if pad is not None and (not is_tensor(pad) or _mha_fast_path(
            tx, tx.load_attr(m, "self_attn"), src, src, src, None)):
        # eager's fused layer (or the stack's nested tensors) on its own path, not modelled;
        # the masks are left out: the layer takes it with float masks too
        raise Unsupported(INEXPRESSIBLE_OP, "TransformerEncoderLayer(src_key_padding_mask=...) on"
                                   " torch's fused eval path")
    # Dropout in training mode breaks in the Dropout handler (RB009) when its p > 0.
    return tx.call_function(ConstVar(encoder_layer_forward),
                               [m, src, src_mask or ConstVar(None), pad or ConstVar(None)],
                               {})


def encoder_layer_forward(layer, x, src_mask, key_padding_mask=None):
    """nn.TransformerEncoderLayer.forward without the fused fast path (which computes the
    same math): self-attention through the MultiheadAttention handler, then the
    feed-forward block, each with a residual and a LayerNorm before (norm_first) or after."""
    def sa_block(h):
        return layer.dropout1(layer.self_attn(h, h, h, attn_mask=src_mask,
                                              key_padding_mask=key_padding_mask,
                                              need_weights=False)[0])

    def ff_block(h):
        return layer.dropout2(layer.linear2(layer.dropout(layer.activation(layer.linear1(h)))))

    if layer.norm_first:
        x = x + sa_block(layer.norm1(x))
        return x + ff_block(layer.norm2(x))
    x = layer.norm1(x + sa_block(x))
    return layer.norm2(x + ff_block(x))


def is_tensor(vt) -> bool:
    return isinstance(vt, TensorVar)


# --- torch.func.functional_call -------------------------------------------------------------
FUNCTIONAL_CALLS = (torch.func.functional_call, torch.nn.utils.stateless.functional_call)
_MISSING = object()


def functional_call(tx, args: list, kwargs: dict):
    """`torch.func.functional_call(module, tensors, args, kwargs)`: the module's call with
    the named parameters and buffers read as the given tensors, as torch's
    `_reparametrize_module` swaps them in for the call and back after (a generator
    context manager the tracer does not enter: RB014, the call eager).  The swap is the
    trace's own: each name reads back the given value (`ctx.attr_writes`, as a store the
    trace made would) during the call only, so nothing is written to the module.  Forms
    not modelled break at the call, which torch then runs: `strict=True`, a module with
    tied tensors (`tie_weights`), a name that is no parameter or buffer, a value that is
    no tensor."""
    names = ("module", "parameter_and_buffer_dicts", "args", "kwargs")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound or k not in names + ("tie_weights", "strict"):
            raise Unsupported(UNSUPPORTED_CALL, f"functional_call argument {k!r}")
        bound[k] = v
    mod_vt, tensors = bound.get("module"), bound.get("parameter_and_buffer_dicts")
    flags = [bound.get(k, ConstVar(d)) for k, d in (("tie_weights", True), ("strict", False))]
    if not (isinstance(mod_vt, ConstVar) and isinstance(mod_vt.value, nn.Module)) or \
            not all(isinstance(f, ConstVar) for f in flags) or flags[1].value:
        raise Unsupported(UNSUPPORTED_CALL, "functional_call of this form (strict=True, or"
                          " not a module)")
    module = mod_vt.value
    dicts = tensors.items if isinstance(tensors, (TupleVar, ListVar)) else [tensors]
    if not all(isinstance(d, DictVar) for d in dicts):
        raise Unsupported(UNSUPPORTED_CALL, "functional_call with tensors not in dicts")
    given = {}
    for d in dicts:
        for name, value in d.items.items():
            if name in given:  # torch raises ValueError: ambiguous
                raise Unsupported(UNSUPPORTED_CALL, f"functional_call: {name!r} given twice")
            given[name] = value
    state = dict(module.named_parameters(remove_duplicate=False))
    state.update(module.named_buffers(remove_duplicate=False))
    if flags[0].value and len({id(t) for t in state.values()}) != len(state):
        raise Unsupported(UNSUPPORTED_CALL, "functional_call of a module with tied tensors")
    overrides = []
    for name, value in given.items():
        if name not in state or not isinstance(value, TensorVar):
            raise Unsupported(UNSUPPORTED_CALL, f"functional_call: {name!r} is no parameter"
                              " or buffer of the module, or its value no tensor")
        prefix, _, leaf = name.rpartition(".")
        overrides.append(((id(module.get_submodule(prefix)), leaf), value))
    call_args = bound.get("args", ConstVar(None))
    if isinstance(call_args, ConstVar) and call_args.value is None:
        call_args = []
    elif isinstance(call_args, TupleVar):
        call_args = list(call_args.items)
    elif isinstance(call_args, ConstVar) and isinstance(call_args.value, tuple):
        call_args = [ConstVar(v) for v in call_args.value]
    else:
        call_args = [call_args]
    call_kwargs = bound.get("kwargs", ConstVar(None))
    if isinstance(call_kwargs, ConstVar) and call_kwargs.value is None:
        call_kwargs = {}
    elif isinstance(call_kwargs, DictVar):
        call_kwargs = dict(call_kwargs.items)
    elif isinstance(call_kwargs, ConstVar) and isinstance(call_kwargs.value, dict):
        call_kwargs = {k: ConstVar(v) for k, v in call_kwargs.value.items()}
    else:
        raise Unsupported(UNSUPPORTED_CALL, "functional_call kwargs that are not a dict")
    writes = tx.ctx.attr_writes
    held = [(key, writes.get(key, _MISSING)) for key, _ in overrides]
    writes.update(overrides)
    try:
        return tx.call_function(mod_vt, call_args, call_kwargs)
    finally:
        for key, old in held:
            if old is _MISSING:
                writes.pop(key, None)
            else:
                writes[key] = old
