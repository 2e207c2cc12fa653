"""A GPT-style transformer block built with GraphBuilder, as a tracer would record it.

Used to measure the default pipeline (op counts before/after, pass timings):

    python -m tests.passes.transformer        # prints the table quoted in spec/passes.md

The block: pre-norm causal self-attention and a GELU MLP with residuals.  Linear
layers are `matmul(x2d, permute(W)) + b` on [B*T, D] rows, as the frontend records
`F.linear`; the causal mask is built from `arange` comparisons, so it is a constant
expression that `fold` evaluates.
"""

from __future__ import annotations

from ir.builder import GraphBuilder
from ir.graph import Graph
from ir.passes.manager import DEFAULT_PIPELINE, run_pipeline
from ir.types import TensorType, f32


def transformer_block(batch: int = 2, seq: int = 16, dim: int = 64, heads: int = 4) -> Graph:
    b = GraphBuilder("block")
    hd = dim // heads
    x = b.input("x", TensorType(f32, (batch, seq, dim)))

    def param(name, *shape):
        return b.input(name, TensorType(f32, shape))

    def linear(h, w, bias):
        rows = b.reshape(h, shape=[batch * seq, h.type.shape[-1]])
        out = b.add(b.matmul(rows, b.permute(w, perm=[1, 0])), bias)
        return b.reshape(out, shape=[batch, seq, w.type.shape[0]])

    def split_heads(h):  # [B, T, D] -> [B, H, T, hd]
        return b.permute(b.reshape(h, shape=[batch, seq, heads, hd]), perm=[0, 2, 1, 3])

    ln1_w, ln1_b = param("ln1_w", dim), param("ln1_b", dim)
    wq, bq, wk, bk = param("wq", dim, dim), param("bq", dim), param("wk", dim, dim), \
        param("bk", dim)
    wv, bv, wo, bo = param("wv", dim, dim), param("bv", dim), param("wo", dim, dim), \
        param("bo", dim)
    ln2_w, ln2_b = param("ln2_w", dim), param("ln2_b", dim)
    w1, b1, w2, b2 = param("w1", 4 * dim, dim), param("b1", 4 * dim), \
        param("w2", dim, 4 * dim), param("b2", dim)

    h = b.layer_norm(x, ln1_w, ln1_b, normalized_ndim=1)
    q, k, v = (split_heads(linear(h, w, bias)) for w, bias in ((wq, bq), (wk, bk), (wv, bv)))
    scores = b.mul(b.matmul(q, b.transpose(k, 2, 3)), 1.0 / hd ** 0.5)
    rows = b.reshape(b.arange(end=seq), shape=[seq, 1])
    cols = b.reshape(b.arange(end=seq), shape=[1, seq])
    causal = b.reshape(b.ge(rows, cols), shape=[1, 1, seq, seq])
    scores = b.where(causal, scores, float("-inf"))
    attn = b.matmul(b.softmax(scores, dim=-1), v)
    attn = b.reshape(b.permute(attn, perm=[0, 2, 1, 3]), shape=[batch, seq, dim])
    x = b.add(x, linear(attn, wo, bo))
    h = b.layer_norm(x, ln2_w, ln2_b, normalized_ndim=1)
    x = b.add(x, linear(b.gelu(linear(h, w1, b1)), w2, b2))
    return b.build([x])


def measure(graph: Graph, repeats: int = 5) -> dict:
    """Op counts (input, after decompose alone, after the pipeline) and best pass times."""
    best: dict[str, float] = {}
    for _ in range(repeats):
        timings: dict[str, float] = {}
        out = run_pipeline(graph, DEFAULT_PIPELINE, timings=timings)
        for name, t in timings.items():
            best[name] = min(best.get(name, t), t)
    decomposed = run_pipeline(graph, ["decompose"])
    return {"input": len(graph.nodes), "decomposed": len(decomposed.nodes),
            "optimized": len(out.nodes), "seconds": best, "ops": out.op_counts()}


if __name__ == "__main__":
    m = measure(transformer_block())
    print(f"transformer block: {m['input']} ops; after decompose {m['decomposed']};"
          f" after the default pipeline {m['optimized']}")
    print("pass timings (best of 5): " + ", ".join(f"{n} {t * 1e3:.1f} ms"
                                                   for n, t in m["seconds"].items()))
    print("ops after:", m["ops"])
