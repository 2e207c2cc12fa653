"""Attention and transformer blocks under CPU `torch.autocast`: compiled forward outputs
and every parameter gradient equal eager's bitwise (issue 35), in bfloat16 and float16.
Each op's backward computes as eager's kernel does: softmax's backward of a half-typed
output in float32, rounded once.
Spec: spec/autograd.md, "Autocast"."""

import copy
import itertools
import math
import os

import pytest
import torch
import torch.nn as nn

import refcomp

DTYPES = [torch.bfloat16, torch.float16]


class Attention(nn.Module):
    """Hand-written multi-head attention: q/k/v Linear, q @ k^T, scale, softmax, @ v."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (m(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for m in (self.q, self.k, self.v))
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return self.o(y)


def _compare(model, args, dtype, loss=lambda out: out.float().square().sum(), close=None):
    """Compiled vs eager under autocast: outputs and every gradient bitwise, or with
    `close` = (dtype, n), within n ulps of dtype at each tensor's largest magnitude."""
    reference = copy.deepcopy(model)
    refcomp.reset()
    compiled = refcomp.compile(model, backend="llvm")
    outs = []
    for run in (compiled, reference):
        with torch.autocast("cpu", dtype):
            out = run(*args)
        loss(out).backward()
        outs.append(out)
    assert outs[0].dtype == outs[1].dtype
    pairs = [("output", *outs)] + [(name, p.grad, q.grad) for (name, p), q in
                                   zip(model.named_parameters(), reference.parameters())]
    for name, a, b in pairs:
        assert (a is None) == (b is None), name
        if b is None:
            continue
        err = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        if close is None:
            assert err == 0 and torch.equal(a, b), (name, err)
        else:  # `close` ulps of the autocast dtype at the tensor's largest magnitude
            dtype, ulps = close
            bound = ulps * torch.finfo(dtype).eps * b.double().abs().max().item()
            assert err <= bound, (name, err, bound)
    entries = [e for es in refcomp.stats()["frames"].values() for e in es]
    assert len(entries) == 1
    return entries[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_hand_written_attention(dtype):
    torch.manual_seed(0)
    entry = _compare(Attention(), (torch.randn(2, 5, 16),), dtype)
    assert entry["backend"] == "llvm"  # every op has its IR rule: no eager fallback



@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_is_eager_kernel(log, dtype):
    """The gradient of a half-typed (log_)softmax is ATen's backward kernel of the
    compiled forward's output: computed in f32, rounded once.  (The forward of a
    half-typed log_softmax is not bitwise: spec/autograd.md, "Autocast".)"""
    torch.manual_seed(0)
    fn = torch.log_softmax if log else torch.softmax
    backward = torch._log_softmax_backward_data if log else torch._softmax_backward_data
    for n in (5, 12, 40):
        x = torch.randn(16, n).to(dtype).requires_grad_()
        g = torch.randn(16, n).to(dtype)
        refcomp.reset()
        y = refcomp.compile(lambda x: fn(x, -1), backend="llvm")(x)
        (grad,) = torch.autograd.grad(y, x, g)
        assert torch.equal(grad, backward(g, y.detach(), -1, dtype)), n


MASKS = {
    "none": lambda t: {},
    "causal": lambda t: {"src_mask": nn.Transformer.generate_square_subsequent_mask(t)},
    "bool": lambda t: {"src_mask": torch.triu(torch.ones(t, t, dtype=torch.bool), 1)},
    "padding": lambda t: {"src_key_padding_mask": torch.tensor([[False] * t,
                                                                [False] * (t - 2) + [True] * 2])},
}


class _Masked(nn.Module):
    def __init__(self, layer, masks):
        super().__init__()
        self.layer, self.masks = layer, masks

    def forward(self, x):
        return self.layer(x, **self.masks)


# Note [Half linear]: refcomp computes a float16 linear with a bias as float32 products
# and sums rounded once (Note [Linear's one rounding], refcomp/tracer/torch_ops.py) in
# MKL's summation order; ATen's float16 addmm on a CPU without AVX512-FP16 sums in its
# own order, so an element whose float32 sum lies at a float16 rounding boundary rounds
# the other way: out_proj's element [0, 1] here (1 of 160; 0 of 6,400 in random 10x16
# by 16x32 products).  One float16 ulp, then carried by the layer's arithmetic.
F16_LINEAR_CASES = {(torch.float16, False, False, "none"),
                    (torch.float16, False, False, "padding")}


# The full matrix takes ~30 s on a loaded machine; by default, batch-first layers without
# a mask or with a key padding mask, and the two float16 cases of Note [Half linear].
SLOW = [pytest.mark.slow,
        pytest.mark.skipif(not os.environ.get("REFCOMP_SLOW"), reason="set REFCOMP_SLOW=1")]


def _layer_cases():
    for mask, batch_first, norm_first, dtype in itertools.product(
            sorted(MASKS), [True, False], [False, True], DTYPES):
        default = (batch_first and mask in ("none", "padding")) or \
            (dtype, batch_first, norm_first, mask) in F16_LINEAR_CASES
        yield pytest.param(mask, batch_first, norm_first, dtype, marks=() if default else SLOW)


@pytest.mark.parametrize("mask, batch_first, norm_first, dtype", _layer_cases())
def test_transformer_encoder_layer(mask, batch_first, norm_first, dtype):
    """Eager's self-attention projects q, k, v with one GEMM and (need_weights=False)
    calls scaled_dot_product_attention, whose half-precision CPU kernel (flash attention:
    blocked, online softmax) is not the math path: under autocast so does refcomp."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=batch_first,
                                       norm_first=norm_first)
    x = torch.randn(2, 5, 16) if batch_first else torch.randn(5, 2, 16)
    # Note [Half linear]: one float16 linear of this seed rounds 1 ulp off eager's; the
    # gradients carry it through the attention's and two LayerNorms' backward (measured:
    # up to 5.8 float16 ulps of the largest element, in_proj_weight)
    close = (dtype, 8) if (dtype, batch_first, norm_first, mask) in F16_LINEAR_CASES else None
    _compare(_Masked(layer, MASKS[mask](5)), (x,), dtype, close=close)


@pytest.mark.xfail(strict=True, reason="Note [Half linear]: 1 float16 ulp in out_proj")
def test_transformer_encoder_layer_f16_linear_bitwise():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, norm_first=False)
    _compare(layer, (torch.randn(5, 2, 16),), torch.float16)


class SDPA(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv, self.o, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x, mask=None, causal=False):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, -1))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                             is_causal=causal)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["causal", "bool", "float"])
def test_scaled_dot_product_attention(form, dtype):
    """F.scaled_dot_product_attention of half-typed q/k/v on the CPU is ATen's flash
    attention kernel (blocked, online softmax), forward and backward: the call stays
    ATen's under autocast, and the graph reading it under grad runs op by op on the
    eager backend, equal to eager bitwise."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    masks = {"causal": None, "bool": torch.randn(5, 5) > 0, "float": torch.randn(5, 5)}
    entry = _compare(SDPA(), (x, masks[form], form == "causal"), dtype)
    assert entry["backend"] == "eager"


class MLPBlock(nn.Module):
    """Pre-norm transformer MLP: x + W2 gelu(W1 LayerNorm(x))."""

    def __init__(self, d=16, approximate="none"):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.approximate = approximate

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.norm(x)), approximate=self.approximate)
        return x + self.down(h)


# Note [Not bitwise under autocast]: two kernels of eager are not reproduced bitwise by
# refcomp's fused kernels (spec/autograd.md, "Autocast"):
# - float32 layer_norm (autocast keeps it float32): ATen's row moments and its backward's
#   weight/bias sums over rows (split across threads) add in another order than refcomp's;
#   the parameter gradients are 1-4 float32 ulps off, the output 1 ulp in ~35% of elements;
# - half-precision gelu: ATen's vectorized kernel uses its own erf (a polynomial times
#   exp) on whole vectors and std::erf on the tail; refcomp's erf rounds elsewhere: ~1%
#   (bf16) to 3% (f16) of elements 1 ulp off forward, ~0.5% backward;
# - float32 log_softmax (cross_entropy under autocast is float32): exp and log and the
#   row sum round elsewhere: the loss is ~1 float32 ulp off.
# They compare within 2 ulps of the autocast dtype at the tensor's largest magnitude (a
# half-precision GEMM of the gradient sums products of the flipped element: its error
# is relative to the sum's terms, not to each result).
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_layer_norm_gelu_mlp_block(approximate, dtype):
    torch.manual_seed(0)
    entry = _compare(MLPBlock(approximate=approximate), (torch.randn(2, 5, 16),), dtype,
                     close=(dtype, 2))
    assert entry["backend"] == "llvm" and entry["training"] is not None


class TinyLM(nn.Module):
    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.embed, self.norm = nn.Embedding(vocab, d), nn.LayerNorm(d)
        self.attn, self.mlp, self.head = SDPA(d), MLPBlock(d), nn.Linear(d, vocab)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        x = self.mlp(x + self.attn(self.norm(x), causal=True))
        logits = self.head(x)
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]),
                                                 targets.view(-1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lm_training_step(dtype):
    """Embedding, causal attention, MLP block, cross_entropy (float32 under autocast):
    the loss and every gradient.  (Measured: every gradient bitwise, the loss 1 float32
    ulp off: Note [Not bitwise under autocast].)"""
    torch.manual_seed(0)
    tokens, targets = torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 5))
    model = TinyLM()
    _compare(model, (tokens, targets), dtype, loss=lambda loss: loss, close=(dtype, 2))


class HalfNorm(nn.Module):
    """A LayerNorm (or RMSNorm) of a half-precision activation: autocast leaves the norm
    alone, so ATen runs it on the bf16/f16 input with float32 parameters (mixed type)."""

    def __init__(self, norm):
        super().__init__()
        self.up, self.norm, self.down = nn.Linear(16, 32), norm, nn.Linear(32, 8)

    def forward(self, x):
        return self.down(self.norm(self.up(x)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=SLOW), pytest.param(3, marks=SLOW)])
def test_norm_of_half_input_backward_in_float(seed, norm, dtype):
    """ATen's norm backward of a half-precision input computes the input's gradient in
    float32 and rounds it once; refcomp computed it in the half type, rounding every op,
    so the Linear before the norm had no gradient bitwise (0 of 8 seeds; now 7 of 8).
    The norm's own float32 parameters are not bitwise: ATen's mixed-type kernel sums
    their gradients over rows in the half type, per thread, in an order that depends on
    the thread count (spec/autograd.md, "Autocast"): compared within 1 half ulp of the
    largest element (measured 0.71)."""
    torch.manual_seed(seed)
    module = nn.LayerNorm(32) if norm == "layer_norm" else nn.RMSNorm(32)
    model = HalfNorm(module)
    reference = copy.deepcopy(model)
    x = torch.randn(6, 16)
    refcomp.reset()
    outs = []
    for run in (refcomp.compile(model, backend="llvm"), reference):
        with torch.autocast("cpu", dtype):
            out = run(x)
        out.float().square().sum().backward()
        outs.append(out)
    assert torch.equal(*outs)
    for name in ("up.weight", "up.bias", "down.weight", "down.bias"):
        a, b = model.get_parameter(name).grad, reference.get_parameter(name).grad
        assert torch.equal(a, b), (name, (a - b).abs().max())
    for name in ("norm.weight", "norm.bias")[:2 if norm == "layer_norm" else 1]:
        a, b = model.get_parameter(name).grad, reference.get_parameter(name).grad
        assert (a - b).abs().max() <= torch.finfo(dtype).eps * b.abs().max(), name


@pytest.mark.parametrize("dtype", DTYPES)
def test_transformer_encoder_with_causal_hint(dtype):
    """nn.TransformerEncoder of two layers, a causal mask passed with is_causal=True (eager's
    MultiheadAttention may hand SDPA the hint instead of the mask)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    masks = {"mask": nn.Transformer.generate_square_subsequent_mask(5), "is_causal": True}
    _compare(_Masked(encoder, masks), (torch.randn(2, 5, 16),), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hand_written_attention_longer_rows(dtype):
    """At 64 keys a row's softmax is not always eager's: refcomp's exp and its f32 row sum
    round elsewhere than ATen's vectorized kernel, and a few probabilities land on the
    other side of a half rounding (measured 7 of 16,384 outputs in bf16, 37 in f16).  The
    gradients are compared within 1 half ulp of the model's largest gradient (measured
    0.62; k.bias's gradient is 0 in exact arithmetic, rounding noise in both)."""
    torch.manual_seed(0)
    model = Attention(64, 4)
    reference = copy.deepcopy(model)
    x = torch.randn(4, 64, 64)
    refcomp.reset()
    outs = []
    for run in (refcomp.compile(model, backend="llvm"), reference):
        with torch.autocast("cpu", dtype):
            out = run(x)
        out.float().square().sum().backward()
        outs.append(out)
    eps = torch.finfo(dtype).eps
    assert (outs[0] != outs[1]).sum() <= 64  # of 16,384
    assert (outs[0].float() - outs[1].float()).abs().max() <= eps * outs[1].abs().max()
    scale = max(p.grad.abs().max() for p in reference.parameters())
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert (p.grad - q.grad).abs().max() <= eps * scale, name


class _Decoder(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, memory):
        return self.layer(x, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transformer_decoder_layer(dtype):
    """Cross-attention (query from the target, key and value the same memory): eager
    projects q alone and k, v with one packed GEMM, then calls SDPA."""
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    _compare(_Decoder(layer), (torch.randn(2, 5, 16), torch.randn(2, 7, 16)), dtype)
