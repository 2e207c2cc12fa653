"""A buffer updated in a training forward from detached values (an exponential moving
average of activations, a step counter) is written back without autograd and the graph
runs on the kernel backend (issue 35): it was sent to the op-by-op eager backend (RB023)
with a note saying the written value requires grad, which it does not.  (A write of a
value that requires grad into an input is still RB010: spec/autograd.md.)  Spec: spec/autograd.md, "Training-mode modules"."""

import copy

import pytest
import torch
import torch.nn as nn

import refcomp


def _ema(m, h):
    m.ema.mul_(0.9).add_(h.detach().mean(0), alpha=0.1)


def _ema_lerp(m, h):
    m.ema.lerp_(h.detach().mean(0), 0.1)


def _copy(m, h):
    m.ema.copy_(h.detach().amax(0))


def _no_grad(m, h):
    with torch.no_grad():
        m.ema.add_(h.mean(0))


class Tracker(nn.Module):
    def __init__(self, update):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.update = update
        self.register_buffer("ema", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        h = self.lin(x)
        self.update(self, h)
        self.steps.add_(1)
        return h.relu()


def _entries():
    return [e for es in refcomp.stats()["frames"].values() for e in es]


@pytest.mark.parametrize("update", [_ema, _ema_lerp, _copy, _no_grad])
def test_buffer_update_from_detached_values_runs_on_the_kernel_backend(update):
    torch.manual_seed(0)
    model = Tracker(update)
    reference = copy.deepcopy(model)
    refcomp.reset()
    compiled = refcomp.compile(model, backend="llvm")
    for step in range(3):
        x = torch.randn(5, 4)
        compiled(x).square().sum().backward()
        reference(x).square().sum().backward()
        torch.testing.assert_close(model.ema, reference.ema, msg=f"step {step}")
        assert int(model.steps) == int(reference.steps) == step + 1
        for p, q in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    assert not model.ema.requires_grad
    (entry,) = _entries()
    assert entry["backend"] == "llvm" and entry["training"] is not None, entry
    assert refcomp.stats()["counters"].get("op_by_op_graphs", 0) == 0
