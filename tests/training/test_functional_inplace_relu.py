"""`F.relu(x, inplace=True)` is `torch.relu_(x)`, as F.relu itself calls it, so the in-place
machinery captures it (issue 33: a ResNet basic block's training step, `out += identity`
then `F.relu(out, inplace=True)`, made 2 graphs and 2 breaks, RB010).  Gradients are
judged against float64: no further from it than 4x eager's distance."""

import copy

import pytest
import torch
import torch.nn.functional as F

import refcomp


class BasicBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = (torch.nn.Conv2d(4, 4, 3, padding=1) for _ in range(2))
        self.b1, self.b2 = torch.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        identity = x
        out = F.relu(self.b1(self.c1(x)), inplace=True)
        out = self.b2(self.c2(out))
        out += identity
        return F.relu(out, inplace=True)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_resnet_basic_block_training_step_is_one_graph_with_eagers_gradients(backend):
    torch.manual_seed(0)
    model = BasicBlock().train()
    eager, wide = copy.deepcopy(model), copy.deepcopy(model).double()
    x = torch.randn(2, 4, 6, 6)
    refcomp.reset()
    report = refcomp.explain(copy.deepcopy(model), backend=backend)(x.clone().requires_grad_())
    assert report.graph_count == 1 and report.graph_break_count == 0, str(report)
    runs = []
    for m, fn, inp in ((model, refcomp.compile(model, backend=backend), x),
                       (eager, eager, x), (wide, wide, x.double())):
        inp = inp.clone().requires_grad_()
        fn(inp).square().sum().backward()
        runs.append([p.grad.double() for p in m.parameters()] + [inp.grad.double()])
    for got, want, truth in zip(*runs):
        assert (got - truth).abs().max() <= 4 * (want - truth).abs().max() + 1e-6
