"""The compiled backward returns each leaf's gradient in the leaf's layout, so autograd's
AccumulateGrad keeps it without a copy (Note [Gradients in the leaf's layout],
ir/autodiff.py; issue 35: Linear weights' gradients came back transposed)."""

import pytest
import torch
import torch.nn as nn

import refcomp


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("shape", [(4, 16), (2, 3, 16)])
def test_linear_gradients_have_the_weights_strides(backend, shape):
    model, twin = _mlp(), _mlp()
    incoming = {}

    def record(name):
        def hook(g):  # (pointer, strides), not the tensor: a reference would make a copy
            incoming[name] = (g.data_ptr(), g.stride())
        return hook

    for name, p in model.named_parameters():
        p.register_hook(record(name))
    compiled = refcomp.compile(model, backend=backend)
    x = torch.randn(*shape)
    model.zero_grad(set_to_none=True)
    compiled(x).sum().backward()
    twin(x).sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        pointer, strides = incoming[name]
        assert strides == p.stride(), name
        assert p.grad.data_ptr() == pointer, f"{name}: AccumulateGrad copied it"
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)


def test_accumulating_into_existing_gradients_is_eagers():
    model, twin = _mlp(), _mlp()
    compiled = refcomp.compile(model)
    for _ in range(2):  # the second step adds into .grad, as eager does
        x = torch.randn(4, 16)
        compiled(x).sum().backward()
        twin(x).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        assert p.grad.stride() == q.grad.stride()
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
