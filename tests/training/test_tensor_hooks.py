"""`Tensor.register_hook` in a forward (issue 35): a break at the call (RB004, with its
own message), which CPython runs on the real tensor the graph before it returned; the
graphs before and after it are compiled.  A hook made in the frame (a lambda, a closure
over an argument such as `self`) crosses the break, made again from its code; it made the
whole frame run eagerly ("a function made in the frame cannot cross a graph break").
A closure over a cell the frame stores into still does (its copy would not share the
cell).  Spec: spec/autograd.md, "Tensor hooks"."""

import copy

import pytest
import torch
import torch.nn as nn

import refcomp

SEEN = []


def double(g):
    return g * 2


def record(g):
    SEEN.append(g.shape)


class Net(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.inp, self.out, self.scale, self.how = nn.Linear(4, 6), nn.Linear(6, 2), 3.0, how

    def forward(self, x, k=0.5):
        h = self.inp(x)
        if self.how == "global":
            h.register_hook(double)
        elif self.how == "lambda":
            h.register_hook(lambda g: g.clamp(-0.1, 0.1))
        elif self.how == "self":
            h.register_hook(lambda g: g * self.scale)
        elif self.how == "argument":
            h.register_hook(lambda g: g * k)
        elif self.how == "observer":
            h.register_hook(record)
        elif self.how == "rebound":
            j = 2.0
            h.register_hook(lambda g: g * j)
            j = 4.0  # eager's hook reads 4.0 when it runs
        return self.out(h.tanh())


def _entries():
    return [e for es in refcomp.stats()["frames"].values() for e in es]


@pytest.mark.parametrize("how", ["global", "lambda", "self", "argument", "observer",
                                 "rebound"])
def test_tensor_hook_in_forward_runs_as_eager(how):
    torch.manual_seed(0)
    model = Net(how)
    reference = copy.deepcopy(model)
    refcomp.reset()
    compiled = refcomp.compile(model)
    x = torch.randn(5, 4)
    SEEN.clear()
    for _ in range(2):  # a hook registered on each call's fresh tensor, as in eager
        compiled(x).square().sum().backward()
        reference(x).square().sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    if how == "observer":
        assert SEEN == [torch.Size([5, 6])] * 4
    report = refcomp.explain(model, x)
    assert [b["id"] for b in report.break_reasons] == ["RB004"]
    assert "register_hook" in report.break_reasons[0]["reason"]
    if how == "rebound":
        assert report.graph_count == 0  # the frame runs eagerly, as before
    else:
        assert report.graph_count == 2 and len(report.training) == 2
