"""The benchmark workloads: plain PyTorch functions and the inputs to call them with.

Owns: `WORKLOADS` (name -> Workload).  Must not know: the candidates (eager,
inductor, refcomp) or how timing is done (bench/harness.py).  Each function uses
only torch ops that refcomp's frontend traces; `bytes` (if set) is the data a
perfect implementation must read and write, for GB/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F


@dataclass
class Workload:
    name: str
    fn: Callable
    make_inputs: Callable[[], tuple]
    bytes: Optional[int] = None  # minimal bytes moved per call (pointwise/reduction)
    note: str = ""
    # A training step: fn returns a scalar loss; each call is forward + backward
    # (zero_grad with set_to_none, then loss.backward(), as users write it; the inputs that
    # require grad are the parameters), timed as one step.
    train: bool = False
    # Checked against the float64 truth (bench/harness.py, Note [Accuracy check]): a
    # candidate whose error exceeds ACCURACY_SLACK x eager's (plus a floor) is WRONG.
    accuracy: bool = False
    # The inputs after the first are weights (an inference model's parameters): the
    # refcomp-freeze candidate holds them as a module's buffers, compiled with
    # options={"freeze": True} (bench/harness.py, refcomp_freeze_candidate).
    weights: bool = False


def _randn(*shape):
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g)


N_POINTWISE = 4 * 1024 * 1024
N_SUM = 16 * 1024 * 1024


def pointwise_cheap(x, y):
    # 10 cheap ops: what a fused kernel does at memory speed.
    a = x * y
    a = a + 1.0
    a = a - x * 0.5
    a = torch.relu(a)
    a = a * a
    a = a + y
    a = torch.abs(a - 2.0)
    return torch.minimum(a, x)


def pointwise_transcendental(x, y):
    a = torch.exp(x * 0.5)
    b = torch.tanh(y)
    c = torch.sigmoid(a - b)
    d = torch.log(c + 1.0)
    e = torch.erf(d * y)
    return e + c * b


def pointwise_14(x, y):
    """14 ops, sigmoid/tanh/gelu/exp among them (issue 38's transcendental row)."""
    a = torch.sigmoid(x) * y
    b = torch.tanh(a + 0.5)
    c = F.gelu(b - y)
    d = torch.exp(c * 0.25)
    e = (d + x) * torch.sigmoid(y)
    return torch.tanh(e) - b * 0.5


def five_reductions(x):
    """sum, mean, var and amax of one [1024, 1024, 4] tensor, over different dims."""
    return x.sum(0), x.mean(1), x.var(2), x.amax(0), x.sum(dim=(0, 1))


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def mlp_block(x, w1, b1, w2, b2):
    h = F.gelu(x @ w1 + b1)
    return x + (h @ w2 + b2)


def _encoder_layer(x, wq, wk, wv, wo, g1, c1, w1, b1, w2, b2, g2, c2, heads):
    batch, seq, dim = x.shape
    hd = dim // heads
    q = (x @ wq).reshape(batch, seq, heads, hd).permute(0, 2, 1, 3)
    k = (x @ wk).reshape(batch, seq, heads, hd).permute(0, 2, 3, 1)
    v = (x @ wv).reshape(batch, seq, heads, hd).permute(0, 2, 1, 3)
    att = torch.softmax((q @ k) * (1.0 / math.sqrt(hd)), dim=-1)
    o = (att @ v).permute(0, 2, 1, 3).reshape(batch, seq, dim) @ wo
    x = F.layer_norm(x + o, (dim,), g1, c1, 1e-5)
    h = F.gelu(x @ w1 + b1) @ w2 + b2
    return F.layer_norm(x + h, (dim,), g2, c2, 1e-5)


def transformer2(x, *p):
    x = _encoder_layer(x, *p[:12], 8)
    return _encoder_layer(x, *p[12:], 8)


def _encoder_params(dim, ff):
    s = 1.0 / math.sqrt(dim)
    layer = [_randn(dim, dim) * s, _randn(dim, dim) * s, _randn(dim, dim) * s,
             _randn(dim, dim) * s, torch.ones(dim), torch.zeros(dim),
             _randn(dim, ff) * s, torch.zeros(ff), _randn(ff, dim) / math.sqrt(ff),
             torch.zeros(dim), torch.ones(dim), torch.zeros(dim)]
    return layer + [t.clone() for t in layer]


def conv_bn_relu(x, w, mean, var, gamma, beta):
    y = F.conv2d(x, w, padding=1)
    y = F.batch_norm(y, mean, var, gamma, beta, training=False, eps=1e-5)
    return torch.relu(y)


def mlp_train(x, w1, b1, w2, b2):
    return mlp_block(x, w1, b1, w2, b2).pow(2).mean()


def transformer_train(x, *p):
    return _encoder_layer(x, *p[:12], 8).pow(2).mean()


def lm_train(ids, targets, emb, wq, wk, wv, wo, w1, w2, head):
    """One causal attention block of a language model and its cross-entropy loss."""
    x = F.embedding(ids, emb)
    b, t, d = x.shape
    heads = 4

    def split(w):
        return (x @ w).view(b, t, heads, d // heads).transpose(1, 2)

    a = F.scaled_dot_product_attention(split(wq), split(wk), split(wv), is_causal=True)
    x = x + a.transpose(1, 2).reshape(b, t, d) @ wo
    x = x + F.gelu(x @ w1) @ w2
    logits = x @ head
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def _lm_inputs(batch=8, seq=128, dim=256, vocab=1000):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    targets = torch.randint(0, vocab, (batch, seq), generator=g)
    weights = [_randn(vocab, dim) * 0.1] + [_randn(dim, dim) * dim ** -0.5 for _ in range(4)] \
        + [_randn(dim, 4 * dim) * dim ** -0.5, _randn(4 * dim, dim) * (4 * dim) ** -0.5,
           _randn(dim, vocab) * dim ** -0.5]
    return (ids, targets) + tuple(w.requires_grad_() for w in weights)


def _lm_layer(x, wqkv, bqkv, wo, bo, g1, c1, w1, b1, w2, b2, g2, c2, heads):
    """A pre-norm causal decoder layer, attention through scaled_dot_product_attention."""
    batch, seq, dim = x.shape
    hd = dim // heads
    q, k, v = F.linear(F.layer_norm(x, (dim,), g1, c1, 1e-5), wqkv, bqkv).split(dim, dim=-1)
    q, k, v = (z.reshape(batch, seq, heads, hd).transpose(1, 2) for z in (q, k, v))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + F.linear(a.transpose(1, 2).reshape(batch, seq, dim), wo, bo)
    h = F.layer_norm(x, (dim,), g2, c2, 1e-5)
    return x + F.linear(F.gelu(F.linear(h, w1, b1)), w2, b2)


def lm2_train(tokens, targets, emb, *p):
    """A 2-layer transformer language model: embedding, two causal SDPA layers, the
    output projection tied to the embedding, cross_entropy over the vocabulary."""
    x = F.embedding(tokens, emb)
    x = _lm_layer(x, *p[:12], 8)
    x = _lm_layer(x, *p[12:24], 8)
    x = F.layer_norm(x, (x.shape[-1],), p[24], p[25], 1e-5)
    logits = F.linear(x, emb)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _lm2_inputs(vocab=2048, batch=8, seq=128, dim=256, ff=1024):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (batch, seq), generator=g)
    targets = torch.randint(0, vocab, (batch, seq), generator=g)
    s = 1.0 / math.sqrt(dim)
    layer = lambda: [_randn(3 * dim, dim) * s, torch.zeros(3 * dim), _randn(dim, dim) * s,
                     torch.zeros(dim), torch.ones(dim), torch.zeros(dim),
                     _randn(ff, dim) * s, torch.zeros(ff), _randn(dim, ff) / math.sqrt(ff),
                     torch.zeros(dim), torch.ones(dim), torch.zeros(dim)]
    params = [_randn(vocab, dim) * 0.02, *layer(), *layer(), torch.ones(dim), torch.zeros(dim)]
    return (tokens, targets, *(t.requires_grad_() for t in params))


def cnn_train(x, targets, *p):
    """A small CNN's training step: three conv 3x3 / batch norm (batch statistics) / ReLU
    blocks, max-pooled after the first two, global average pool, linear head,
    cross_entropy."""
    for i in range(3):
        w, g, b = p[3 * i:3 * i + 3]
        x = F.relu(F.batch_norm(F.conv2d(x, w, padding=1), None, None, g, b, training=True))
        if i < 2:
            x = F.max_pool2d(x, 2)
    logits = F.linear(x.mean((2, 3)), p[9], p[10])
    return F.cross_entropy(logits, targets)


def _cnn_inputs(batch=32, classes=10):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 3, 32, 32, generator=g)
    targets = torch.randint(0, classes, (batch,), generator=g)
    params = []
    for cin, cout in [(3, 32), (32, 64), (64, 128)]:
        params += [_randn(cout, cin, 3, 3) * (cin * 9) ** -0.5, torch.ones(cout),
                   torch.zeros(cout)]
    params += [_randn(classes, 128) * 128 ** -0.5, torch.zeros(classes)]
    return (x, targets, *(t.requires_grad_() for t in params))


def strided_inplace(x, c):
    """Writes into windows of a clone (issue 33): a strided mul_, a narrow add_, a diagonal
    fill_, then one pointwise op over the whole (spec/memory.md, "Writes in place")."""
    h = x.clone()
    h[:, 1::2].mul_(3)
    h[1:].add_(c)
    h.diagonal().fill_(0.5)
    return h.exp()


def _params(*ts):
    """Training inputs: every floating tensor but the first (the batch) requires grad."""
    return (ts[0],) + tuple(t.requires_grad_() for t in ts[1:])


def tiny(x, y):
    return torch.relu(x * y + x)


def one_break(x, y):
    a = torch.relu(x * y + x)
    s = a.sum().item()  # a graph break for refcomp (RB002) and torch.compile alike
    return a * s + y


def var01(x):
    return x.var(dim=(0, 1))


def sum_all(x):
    return x.sum()


def mean_rows(x):
    return x.mean(dim=1)


def reduce_dim(d):
    def fn(x):
        return x.sum(dim=d)
    fn.__name__ = f"reduce_dim{d}"
    return fn


_R = (1024, 1024, 4)
WORKLOADS = {w.name: w for w in [
    Workload("pointwise_cheap", pointwise_cheap,
             lambda: (_randn(N_POINTWISE), _randn(N_POINTWISE)), bytes=3 * 4 * N_POINTWISE,
             note="10 cheap ops on 4M f32"),
    Workload("pointwise_transc", pointwise_transcendental,
             lambda: (_randn(N_POINTWISE), _randn(N_POINTWISE)), bytes=3 * 4 * N_POINTWISE,
             note="exp, tanh, sigmoid, log, erf + 6 cheap ops on 4M f32"),
    Workload("pointwise_14", pointwise_14,
             lambda: (_randn(N_POINTWISE), _randn(N_POINTWISE)), bytes=3 * 4 * N_POINTWISE,
             note="14 ops with sigmoid, tanh, gelu and exp on 4M f32"),
    Workload("softmax", softmax, lambda: (_randn(4096, 1024),), bytes=2 * 4 * 4096 * 1024),
    Workload("layer_norm", layer_norm,
             lambda: (_randn(4096, 1024), _randn(1024), _randn(1024)),
             bytes=2 * 4 * 4096 * 1024),
    Workload("mlp", mlp_block,
             lambda: (_randn(256, 1024), _randn(1024, 4096) * 0.03, _randn(4096),
                      _randn(4096, 1024) * 0.015, _randn(1024)),
             weights=True, note="256x1024 -> 4096 (GELU) -> 1024, residual"),
    Workload("transformer2", transformer2,
             lambda: (_randn(8, 128, 256),) + tuple(_encoder_params(256, 1024)),
             weights=True, note="2 encoder layers, batch 8, seq 128, dim 256, 8 heads, ff 1024"),
    Workload("conv_bn_relu", conv_bn_relu,
             lambda: (_randn(8, 64, 56, 56), _randn(64, 64, 3, 3) * 0.05, _randn(64) * 0.1,
                      torch.rand(64) + 0.5, torch.rand(64) + 0.5, _randn(64) * 0.1),
             weights=True, note="conv 3x3 64->64 on 8x64x56x56, eval batch norm, relu"),
    Workload("mlp_train", mlp_train,
             lambda: _params(_randn(256, 1024), _randn(1024, 4096) * 0.03, _randn(4096),
                             _randn(4096, 1024) * 0.015, _randn(1024)),
             train=True, note="training step (forward + backward) of mlp, loss mean(y**2)"),
    Workload("transformer_train", transformer_train,
             lambda: _params(_randn(8, 128, 256), *_encoder_params(256, 1024)[:12]),
             train=True, note="training step of one encoder layer (transformer2's first),"
             " loss mean(y**2)"),
    Workload("lm_train", lm_train, _lm_inputs, train=True,
             note="training step of a causal attention block (SDPA) with its vocabulary head"
             " and cross_entropy, batch 8, seq 128, dim 256, vocab 1000"),
    Workload("lm2_train", lm2_train, _lm2_inputs,
             train=True, note="training step of a 2-layer causal LM (embedding, SDPA,"
             " cross_entropy; vocab 2048, batch 8, seq 128, dim 256, 8 heads, ff 1024)"),
    Workload("cnn_train", cnn_train, _cnn_inputs, train=True,
             note="training step of a small CNN: 3 x (conv 3x3, batch norm in training mode,"
             " ReLU), max pool after the first two, 3->32->64->128 channels, batch 32 of"
             " 3x32x32, global average pool, linear head, cross_entropy"),
    Workload("strided_inplace", strided_inplace, lambda: (_randn(2048, 2048), _randn(2048)),
             note="h = x.clone(); h[:, 1::2].mul_(3); h[1:].add_(c); h.diagonal().fill_(0.5);"
             " h.exp() on 2048x2048 f32"),
    Workload("tiny", tiny, lambda: (_randn(8), _randn(8)), note="8 elements, 3 ops"),
    Workload("one_break", one_break, lambda: (_randn(8), _randn(8)),
             note="tiny with one graph break (.item()): two graphs and the native step"
             " between them (issue 12)"),
] + [Workload(f"reduce_dim{d}", reduce_dim(d), lambda: (_randn(*_R),),
              bytes=4 * (math.prod(_R) + math.prod(_R) // _R[d]), note="sum of [1024,1024,4]",
              accuracy=True)
     for d in range(3)] + [
    Workload("var_dims01", var01, lambda: (_randn(*_R) + 3.0,),
             bytes=4 * (math.prod(_R) + 4), accuracy=True,
             note="var over dims (0, 1) of [1024,1024,4] (mean 3): 1M elements per result"),
    Workload("reduce5", five_reductions, lambda: (_randn(*_R) + 1.0,),
             bytes=4 * math.prod(_R), accuracy=True,
             note="sum(0), mean(1), var(2), amax(0), sum((0, 1)) of one [1024,1024,4]"),
    Workload("sum_16m", sum_all, lambda: (_randn(N_SUM) + 1.0,), bytes=4 * N_SUM,
             accuracy=True, note="sum of all 16M f32 (mean 1)"),
    Workload("mean_rows", mean_rows, lambda: (_randn(64, 65536) + 1.0,),
             bytes=4 * (64 * 65536 + 64), accuracy=True, note="mean over dim 1 of [64, 65536]"),
]}
