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
