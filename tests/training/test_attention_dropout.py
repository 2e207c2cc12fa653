"""MultiheadAttention and nn.TransformerEncoderLayer with dropout in training mode are
compiled (issue 35: RB009, the whole frame eager): the attention weights' dropout is
drawn after the softmax as eager draws it (F.multi_head_attention_forward's dropout, or
the math path of scaled_dot_product_attention when need_weights=False: the same draw),
so under one seed outputs, returned weights and gradients equal eager's.  Spec:
spec/autograd.md, "Training-mode modules"."""

import copy

import pytest
import torch
import torch.nn as nn

import refcomp


def _entries():
    return [e for es in refcomp.stats()["frames"].values() for e in es]


def _run(module, args, seed):
    torch.manual_seed(seed)
    out = module(*args)
    first = out[0] if isinstance(out, tuple) else out
    first.square().sum().backward()
    return out


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_multihead_attention_dropout_draws_as_eager(need_weights, masked):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, dropout=0.25, batch_first=True).train()
    reference = copy.deepcopy(mha)
    x = torch.randn(2, 5, 16)
    mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1) if masked else None
    refcomp.reset()
    compiled = refcomp.compile(mha, backend="llvm")
    for step in range(2):
        kwargs = {"need_weights": need_weights, "attn_mask": mask}
        got = _run(lambda q: compiled(q, q, q, **kwargs), (x,), step)
        want = _run(lambda q: reference(q, q, q, **kwargs), (x,), step)
        torch.testing.assert_close(got[0], want[0], msg=f"step {step}")
        if need_weights:
            torch.testing.assert_close(got[1], want[1])
    for p, q in zip(mha.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    (entry,) = _entries()
    assert entry["reason"] is None and entry["backend"] == "llvm" and entry["training"]


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_with_dropout_trains_as_eager(norm_first):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True,
                                       norm_first=norm_first).train()
    reference = copy.deepcopy(layer)
    x = torch.randn(2, 6, 16)
    refcomp.reset()
    compiled = refcomp.compile(layer, backend="llvm")
    for step in range(2):
        torch.testing.assert_close(_run(compiled, (x,), step), _run(reference, (x,), step))
    for p, q in zip(layer.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    (entry,) = _entries()
    assert entry["reason"] is None and entry["backend"] == "llvm" and entry["training"]
    assert torch.initial_seed() == 1  # the stream the last step seeded, not reseeded
