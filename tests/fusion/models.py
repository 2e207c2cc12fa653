"""Graphs written in primitives, as `decompose` leaves them: the workloads fusion is
judged on (spec/fusion.md).  Each function returns a built `ir.Graph`."""

from __future__ import annotations

from ir.builder import GraphBuilder
from ir.types import TensorType, f32


def pointwise_chain(shape=(8, 16), ops: int = 10):
    """`ops` pointwise ops in a line, alternating unary and scalar binary ops."""
    b = GraphBuilder("chain")
    x = b.input("x", TensorType(f32, shape))
    y = x
    menu = [lambda v: b.mul(v, 1.5), b.tanh, lambda v: b.add(v, 0.25), b.sigmoid,
            lambda v: b.sub(v, 0.5), b.relu]
    for i in range(ops):
        y = menu[i % len(menu)](y)
    return b.build([y])


def softmax(b: GraphBuilder, x, dim: int = -1):
    m = b.amax(x, dims=[dim], keepdim=True)
    e = b.exp(b.sub(x, m))
    return b.div(e, b.sum(e, dims=[dim], keepdim=True))


def log_softmax(b: GraphBuilder, x, dim: int = -1):
    shifted = b.sub(x, b.amax(x, dims=[dim], keepdim=True))
    return b.sub(shifted, b.log(b.sum(b.exp(shifted), dims=[dim], keepdim=True)))


def layer_norm(b: GraphBuilder, x, w, bias, eps: float = 1e-5):
    mean = b.mean(x, dims=[-1], keepdim=True)
    d = b.sub(x, mean)
    var = b.mean(b.mul(d, d), dims=[-1], keepdim=True)
    return b.add(b.mul(b.mul(d, b.rsqrt(b.add(var, eps))), w), bias)


def rms_norm(b: GraphBuilder, x, w, eps: float = 1e-6):
    ms = b.mean(b.mul(x, x), dims=[-1], keepdim=True)
    return b.mul(b.mul(x, b.rsqrt(b.add(ms, eps))), w)


def single(kind: str, shape=(4, 16)):
    """One normalization or softmax over the last dim of an input."""
    b = GraphBuilder(kind)
    x = b.input("x", TensorType(f32, shape))
    if kind in ("layer_norm", "rms_norm"):
        w = b.input("w", TensorType(f32, shape[-1:]))
        if kind == "rms_norm":
            return b.build([rms_norm(b, x, w)])
        bias = b.input("b", TensorType(f32, shape[-1:]))
        return b.build([layer_norm(b, x, w, bias)])
    return b.build([{"softmax": softmax, "log_softmax": log_softmax}[kind](b, x)])


def mlp(b: GraphBuilder, x, w1, b1, w2, b2, residual=None):
    """matmul, bias, gelu, matmul, bias, residual (x unless given)."""
    h = b.gelu(b.add(b.matmul(x, w1), b1))
    return b.add(b.add(b.matmul(h, w2), b2), x if residual is None else residual)


def mlp_graph(tokens=8, dim=16, hidden=32):
    b = GraphBuilder("mlp")
    x = b.input("x", TensorType(f32, (tokens, dim)))
    w1 = b.input("w1", TensorType(f32, (dim, hidden)))
    b1 = b.input("b1", TensorType(f32, (hidden,)))
    w2 = b.input("w2", TensorType(f32, (hidden, dim)))
    b2 = b.input("b2", TensorType(f32, (dim,)))
    return b.build([mlp(b, x, w1, b1, w2, b2)])


def transformer_block(tokens=8, dim=16, heads=2, hidden=32):
    """Pre-norm encoder block: x + attn(ln1(x)), then + mlp(ln2(.)), in primitives."""
    b = GraphBuilder("block")
    t = lambda name, *shape: b.input(name, TensorType(f32, shape))  # noqa: E731
    x = t("x", tokens, dim)
    ln1_w, ln1_b, ln2_w, ln2_b = t("ln1_w", dim), t("ln1_b", dim), t("ln2_w", dim), t("ln2_b", dim)
    wq, wk, wv, wo = (t(n, dim, dim) for n in ("wq", "wk", "wv", "wo"))
    bq, bk, bv, bo = (t(n, dim) for n in ("bq", "bk", "bv", "bo"))
    w1, b1, w2, b2 = t("w1", dim, hidden), t("b1", hidden), t("w2", hidden, dim), t("b2", dim)
    dh = dim // heads

    def split_heads(v):  # [T, D] -> [H, T, dh]
        return b.permute(b.reshape(v, shape=[tokens, heads, dh]), perm=[1, 0, 2])

    h = layer_norm(b, x, ln1_w, ln1_b)
    q = split_heads(b.add(b.matmul(h, wq), bq))
    k = split_heads(b.add(b.matmul(h, wk), bk))
    v = split_heads(b.add(b.matmul(h, wv), bv))
    scores = b.mul(b.matmul(q, b.permute(k, perm=[0, 2, 1])), dh ** -0.5)
    attn = b.matmul(softmax(b, scores), v)  # [H, T, dh]
    merged = b.reshape(b.permute(attn, perm=[1, 0, 2]), shape=[tokens, dim])
    x1 = b.add(b.add(b.matmul(merged, wo), bo), x)
    h2 = layer_norm(b, x1, ln2_w, ln2_b)
    return b.build([mlp(b, h2, w1, b1, w2, b2, residual=x1)])
