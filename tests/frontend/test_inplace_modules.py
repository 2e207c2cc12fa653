"""An activation module built with inplace=True writes its input, as in eager (issue 33).

ReLU/SiLU/LeakyReLU(inplace=True) were traced as their out-of-place ops: a caller reading
the input after the call got the old values (a wrong answer, not a break).
"""

import pytest
import torch
import torch.nn as nn

import refcomp


@pytest.mark.parametrize("make", [lambda: nn.ReLU(inplace=True), lambda: nn.SiLU(inplace=True),
                                  lambda: nn.LeakyReLU(0.2, inplace=True)],
                         ids=["relu", "silu", "leaky_relu"])
def test_inplace_activation_writes_its_input(make):
    act = make()

    def f(a):
        x = a * 2
        y = act(x)
        return x, y

    a = torch.randn(6)
    expected = f(a.clone())
    got = refcomp.compile(f)(a.clone())
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_relu_inplace_module_is_captured():
    act = nn.ReLU(inplace=True)

    def f(a):
        x = a * 2
        act(x)
        return x

    report = refcomp.explain(f, torch.randn(6))
    assert report.graph_count == 1 and report.graph_break_count == 0


class _DenseBlock(nn.Module):
    """densenet's layer: cat, BatchNorm, ReLU(inplace=True), conv."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, a, b):
        return self.conv(self.relu(self.bn(torch.cat([a, b], 1))))


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_dense_block_inplace_relu_under_grad_is_one_graph(train):
    """relu_ on an intermediate that requires grad is recorded by eager's autograd as relu
    of the old value: captured, forward and gradients equal eager's."""
    torch.manual_seed(0)
    m = _DenseBlock().train(train)
    a, b = torch.randn(2, 4, 5, 5, requires_grad=True), torch.randn(2, 4, 5, 5)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    expected = m(a, b)
    expected.sum().backward()
    grads = [p.grad.clone() for p in m.parameters()] + [a.grad.clone()]
    m.load_state_dict(state)
    m.zero_grad()
    a.grad = None
    got = refcomp.compile(m)(a, b)
    got.sum().backward()
    torch.testing.assert_close(got, expected)
    for e, g in zip(grads, [p.grad for p in m.parameters()] + [a.grad]):
        torch.testing.assert_close(g, e)
    m.load_state_dict(state)
    report = refcomp.explain(m, a, b)
    assert report.graph_count == 1 and report.graph_break_count == 0


def test_inplace_on_a_leaf_made_in_the_frame_breaks():
    def f(x):
        u = torch.ones(3, requires_grad=True)
        u.relu_()
        return u * x

    report = refcomp.explain(f, torch.randn(3))
    assert any("RB010" in str(r) for r in report.break_reasons)


def test_inplace_on_a_value_saved_for_backward_raises_like_eager():
    def f(x, w):
        z = (x * w).sigmoid()  # sigmoid's backward saves its result z
        z.mul_(2)
        return z

    x, w = torch.randn(4), torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(x, w).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        refcomp.compile(f)(x, w).sum().backward()
