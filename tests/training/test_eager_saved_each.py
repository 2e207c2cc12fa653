"""`eager_saved_each` (one pass for every output) equals `eager_saved` per output on the
joint graphs of real training steps (ir/autodiff.py; Note [Saved by eager])."""

import torch
import torch.nn as nn

import refcomp
import refcomp.autograd as autograd
from ir.autodiff import eager_saved


def test_one_pass_equals_one_walk_per_output(monkeypatch):
    compared = []
    each = autograd.eager_saved_each

    def checked(graph, diff, outputs, extra=None):
        result = each(graph, diff, outputs, extra)
        for k in outputs:
            assert result[k] == eager_saved(graph, diff, [k], extra)
        compared.append(len(outputs))
        return result

    monkeypatch.setattr(autograd, "eager_saved_each", checked)
    layers = []
    for _ in range(2):
        layers += [nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU()]
    refcomp.reset()
    refcomp.compile(nn.Sequential(*layers))(torch.randn(2, 3, 6, 6)).sum().backward()

    def several_outputs(x, w):
        h = torch.tanh(x @ w)
        return h.exp(), (h * x).sigmoid(), h.std(1)

    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    outs = refcomp.compile(several_outputs)(x, w)
    sum(o.sum() for o in outs).backward()
    assert compared and max(compared) >= 3
