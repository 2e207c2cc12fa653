"""Serving loops over many sizes (issue 16): under dynamic=True one graph serves every size
and no kernel is compiled after the first call (Note [Runtime sizes] in codegen/kernel.py);
under dynamic=None automatic dynamic needs at most two graphs.  Results equal eager."""

import pytest
import torch

import refcomp
from codegen import stats as codegen_stats

BATCHES = list(range(2, 32))  # 30 batch sizes
PAIRS = [(2 + i % 5, 3 + i) for i in range(30)]  # 30 (batch, sequence) pairs


def _models():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                              torch.nn.Linear(32, 8)).eval()
    enc = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    return {"mlp": (mlp, [(b, 16) for b in BATCHES]),
            "encoder": (enc, [(b, s, 16) for b, s in PAIRS])}


def _serve(model, shapes, dynamic):
    refcomp.reset()
    compiled = refcomp.compile(model, backend="llvm", dynamic=dynamic)
    kernels = []
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(*shape)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
            kernels.append(codegen_stats.snapshot()["kernels_compiled"])
    return refcomp.stats()["counters"], kernels


@pytest.mark.parametrize("name", ["mlp", "encoder"])
def test_dynamic_true_serves_every_size_with_one_graph_and_no_new_kernel(name):
    model, shapes = _models()[name]
    counters, kernels = _serve(model, shapes, True)
    assert counters["graphs"] == 1
    assert kernels[0] > 0 and kernels[-1] == kernels[0]  # nothing compiled after call 1


@pytest.mark.parametrize("name", ["mlp", "encoder"])
def test_automatic_dynamic_serves_every_size_with_at_most_two_graphs(name):
    model, shapes = _models()[name]
    counters, kernels = _serve(model, shapes, None)
    assert counters["graphs"] <= 2
    assert kernels[-1] == kernels[1]  # the second graph's kernels serve every later size


BERT_PAIRS = [(b, s) for b in (2, 3, 5, 6, 8) for s in (5, 9, 16, 23, 40)]  # 25 pairs


def test_bert_encoder_serves_25_sizes_with_one_graph_and_no_new_kernel():
    """A BERT-like encoder with padding masks (transformers builds its SDPA mask from
    `arange` of the batch and sequence sizes and indexes the padding mask by it): one
    graph over symbolic sizes (issue 36).  Batch 1 is left out: sizes 0 and 1 are always
    specialized (spec/guards.md, "Dynamic sizes"), so a batch of 1 makes a second graph."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=64)
    model = transformers.BertModel(config).eval()
    refcomp.reset()
    compiled = refcomp.compile(model, backend="llvm", dynamic=True)
    kernels = []
    with torch.no_grad():
        for b, s in BERT_PAIRS:
            ids = torch.randint(0, 100, (b, s))
            mask = torch.ones(b, s, dtype=torch.long)
            mask[0, s // 2:] = 0  # padding in the first sequence
            got = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
            want = model(input_ids=ids, attention_mask=mask).last_hidden_state
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            kernels.append(codegen_stats.snapshot()["kernels_compiled"])
    counters = refcomp.stats()["counters"]
    assert counters["graphs"] == 1 and counters.get("recompiles", 0) == 0
    assert kernels[0] > 0 and kernels[-1] == kernels[0]


def test_convolution_serves_batch_and_spatial_sizes_with_one_graph():
    """A stride-1 convolution's batch and spatial sizes stay symbolic under dynamic=True;
    only the channel count, which the weight fixes, is specialised (its type error names
    only that size, so the retry pins only its symbol: Note [Specialised dims])."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1).eval()
    refcomp.reset()
    compiled = refcomp.compile(lambda x: conv(x).relu(), backend="llvm", dynamic=True)
    with torch.no_grad():
        for n, hw in [(2, 8), (3, 10), (5, 6), (4, 13)]:
            x = torch.randn(n, 3, hw, hw)
            torch.testing.assert_close(compiled(x), conv(x).relu(), rtol=1e-4, atol=1e-4)
    assert refcomp.stats()["counters"]["graphs"] == 1
