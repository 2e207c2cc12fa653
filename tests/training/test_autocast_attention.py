"""Attention and transformer blocks under CPU `torch.autocast`: compiled forward outputs
and every parameter gradient equal eager's bitwise (issue 35), in bfloat16 and float16.
Each op's backward computes as eager's kernel does: softmax's backward of a half-typed
output in float32, rounded once.
Spec: spec/autograd.md, "Autocast"."""

import copy
import math

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


def _compare(model, args, dtype, loss=lambda out: out.float().square().sum()):
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
    assert torch.equal(outs[0], outs[1]), (outs[0].float() - outs[1].float()).abs().max()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            assert torch.equal(p.grad, q.grad), (name, (p.grad - q.grad).abs().max())
    entries = [e for es in refcomp.stats()["frames"].values() for e in es]
    assert len(entries) == 1 and entries[0]["training"] is not None
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
