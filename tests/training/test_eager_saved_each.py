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


def test_saved_so_far_equals_the_whole_computation(monkeypatch):
    """The tracer's incremental question (before each in-place op) gets the answer the
    whole graph's computation gives."""
    from ir.autodiff import SavedSoFar, saved_by_eager, storage_classes

    answers = []
    ask = SavedSoFar.shares_storage

    def checked(self, inputs, wants, nodes, value):
        got = ask(self, inputs, wants, nodes, value)
        # differentiable_values' rule, over the graph recorded so far
        diff = {v for v, w in zip(inputs, wants) if w and v.type.dtype.is_float}
        for node in nodes:
            if any(v in diff for v in node.inputs):
                diff.update(v for v in node.outputs if v.type.dtype.is_float)
        saved = saved_by_eager(nodes, diff, without_vjp=True, extra=self.extra)
        find = storage_classes(nodes)
        assert got == (find(value) in {find(v) for v in saved})
        answers.append(got)
        return got

    monkeypatch.setattr(SavedSoFar, "shares_storage", checked)

    def steps(x, w, buf):
        h = torch.tanh(x @ w)
        buf.mul_(0.9)               # not saved: asked, False
        s = h.sigmoid()
        out = s * 2
        s2 = (x * w).exp()
        buf.add_(1.0)
        return out, s2

    x, w = torch.randn(3, 3), torch.randn(3, 3, requires_grad=True)
    refcomp.reset()
    outs = refcomp.compile(steps, backend="eager")(x, w, torch.zeros(3))
    sum(o.sum() for o in outs).backward()
    layers = [nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(inplace=True)] * 2
    refcomp.compile(nn.Sequential(*layers))(torch.randn(2, 3, 6, 6)).sum().backward()
    assert len(answers) >= 3
