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


def test_sequential_repeating_modules_stays_compiled():
    """A Sequential that holds one Linear twice reaches one weight at two sources; with its
    input written in place (ReLU(inplace=True) first) the no-storage-sharing guard covered
    every input, so it failed right after tracing and the module ran eagerly on every
    call.  Only a written-back input must not share storage with another input."""
    torch.manual_seed(0)
    lin, act = nn.Linear(4, 4), nn.ReLU(inplace=True)
    m = nn.Sequential(act, lin, act, lin, act)
    refcomp.reset()
    compiled = refcomp.compile(m)
    for _ in range(2):
        x = torch.randn(3, 4)
        x_eager = x.clone()
        got, expected = compiled(x), m(x_eager)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        torch.testing.assert_close(x, x_eager, rtol=0, atol=0)
    counters = refcomp.stats()["counters"]
    assert counters.get("compiled_calls") == 2 and not counters.get("eager_calls"), counters


def test_written_input_aliasing_another_input_is_refused_at_call():
    """The guard still holds where it must: an input written back that shares storage with
    another input at a later call (x and y the same tensor) misses, and the call is eager's."""
    def f(x, y):
        x.add_(1)
        return y * 2

    compiled = refcomp.compile(f)
    a, b = torch.zeros(3), torch.zeros(3)
    torch.testing.assert_close(compiled(a, b), torch.zeros(3))
    t = torch.zeros(3)
    torch.testing.assert_close(compiled(t, t), torch.full((3,), 2.0))
    torch.testing.assert_close(t, torch.ones(3))
