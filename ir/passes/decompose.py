"""Decomposition: composite ops into primitives, each rule written as the math it computes.

Owns: the `decompose` pass and `RULES`, its rule table on the rewrite engine
(ir/rewrite.py), one rule per composite op, named after it.  A rule gets a
GraphBuilder positioned where the composite was, the node's operands and attributes,
and returns the value that replaces the node's result (or None to keep the node).
Spec: spec/passes.md, "decompose".

Not decomposed, on purpose: `gelu` and `silu` are pointwise ops with a scalar form
that every backend lowers inside a fused kernel, so splitting them buys nothing;
`linear` is not an op (the frontend records matmul + permute + add).
"""

from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Graph, Value
from ir.ops.rules import normalize_dim, normalize_dims
from ir.passes.registry import register_pass
from ir.rewrite import RuleTable, rewrite
from ir.types import is_symbolic

RULES = RuleTable("decompose")


def decomposes(op_name: str):
    """Decorator: `fn(b, *operands, **attrs)` is the rule for `op_name`."""
    return RULES.rule(op_name, name=op_name, unpack=True)


def _dim_size_is_zero(x: Value, dims) -> bool:
    return any(not is_symbolic(x.type.shape[d]) and x.type.shape[d] == 0 for d in dims)


@decomposes("softmax")
def softmax(b: GraphBuilder, x: Value, dim: int) -> Value:
    """softmax(x) = exp(x - max(x)) / sum(exp(x - max(x)))   along dim"""
    d = normalize_dim(dim, x.type.rank)
    if _dim_size_is_zero(x, [d]):
        return x  # nothing to normalize: the result is empty, like x
    e = b.exp(b.sub(x, b.amax(x, dims=[d], keepdim=True)))
    return b.div(e, b.sum(e, dims=[d], keepdim=True))


@decomposes("log_softmax")
def log_softmax(b: GraphBuilder, x: Value, dim: int) -> Value:
    """log_softmax(x) = (x - max(x)) - log(sum(exp(x - max(x))))   along dim"""
    d = normalize_dim(dim, x.type.rank)
    if _dim_size_is_zero(x, [d]):
        return x
    shifted = b.sub(x, b.amax(x, dims=[d], keepdim=True))
    return b.sub(shifted, b.log(b.sum(b.exp(shifted), dims=[d], keepdim=True)))


@decomposes("layer_norm")
def layer_norm(b: GraphBuilder, x: Value, weight: Value, bias: Value,
               normalized_ndim: int, eps: float) -> Value:
    """layer_norm(x) = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * weight + bias"""
    dims = list(range(x.type.rank - normalized_ndim, x.type.rank))
    centered = b.sub(x, b.mean(x, dims=dims, keepdim=True))
    var = b.mean(b.mul(centered, centered), dims=dims, keepdim=True)
    return _like(b, b.add(b.mul(b.div(centered, b.sqrt(b.add(var, eps))), weight), bias), x)


@decomposes("rms_norm")
def rms_norm(b: GraphBuilder, x: Value, weight: Value, normalized_ndim: int,
             eps: float) -> Value:
    """rms_norm(x) = x / sqrt(mean(x^2) + eps) * weight"""
    dims = list(range(x.type.rank - normalized_ndim, x.type.rank))
    ms = b.mean(b.mul(x, x), dims=dims, keepdim=True)
    return _like(b, b.mul(b.div(x, b.sqrt(b.add(ms, eps))), weight), x)


@decomposes("batch_norm")
def batch_norm(b: GraphBuilder, x: Value, mean: Value, var: Value, weight: Value,
               bias: Value, eps: float) -> Value:
    """batch_norm(x) = (x - mean) * (weight / sqrt(var + eps)) + bias   per channel (dim 1)"""
    def per_channel(v: Value) -> Value:  # [C] -> [1, C, 1, ...] so it broadcasts on dim 1
        return b.reshape(v, shape=[1, v.type.shape[0]] + [1] * (x.type.rank - 2))

    scale = b.div(weight, b.sqrt(b.add(var, eps)))
    out = b.add(b.mul(b.sub(x, per_channel(mean)), per_channel(scale)), per_channel(bias))
    return _like(b, out, x)


def _like(b: GraphBuilder, out: Value, x: Value) -> Value:
    """The normalizations return x's dtype, as torch's do, even when weight or bias (or
    the statistics) are wider: bf16 activations with float32 parameters under autocast."""
    if out.type.dtype == x.type.dtype:
        return out
    return b.cast(out, dtype=x.type.dtype)


@decomposes("var")
def var(b: GraphBuilder, x: Value, dims, keepdim: bool, correction: int) -> Value:
    """var(x) = sum((x - mean(x))^2) / max(N - correction, 0)   over dims (N static)"""
    axes = list(normalize_dims(dims, x.type.rank)) if dims else list(range(x.type.rank))
    n = 1
    for d in axes:
        n = n * x.type.shape[d]
    if is_symbolic(n):
        return None  # the count is not a number: keep `var` (see the pass's contract)
    centered = b.sub(x, b.mean(x, dims=axes, keepdim=True))
    total = b.sum(b.mul(centered, centered), dims=axes, keepdim=keepdim)
    return b.div(total, float(max(n - correction, 0)))


@register_pass("decompose")
def decompose(g: Graph) -> Graph:
    """Rewrite every op in DECOMPOSITIONS into primitives, in place of the node.

    Rewrites: softmax, log_softmax, layer_norm, rms_norm, batch_norm (inference form,
    running statistics) and var (when the reduced element count is static; with
    symbolic sizes var stays).  Softmax over an empty dim is its (empty) input.
    Requires: a verified graph.  Preserves: every value's type; results up to
    rounding (the primitives round after each op, as eager PyTorch's decompositions
    do); inputs, outputs and the order of other nodes.  Leaves fused bodies alone.
    Idempotent (no decomposition produces a composite op).  The rule table runs on
    the rewrite engine (ir/rewrite.py).
    """
    return rewrite(g, RULES)


# op name -> its decomposition, as written above
DECOMPOSITIONS = {rule.name: rule.fn for rule in RULES}
