"""Which inputs a compiled graph's autograd node has edges to (Note [Inputs no gradient
reaches], refcomp/autograd.py; spec/autograd.md).  Autograd runs every node an edge
leads to, and a node version-checks what it saved before it looks at its gradient; so
an edge eager does not have runs a node eager never runs, and raises where eager does
not.
"""

from __future__ import annotations

import pytest
import torch

import refcomp

BACKENDS = ["interp", "llvm", "eager"]


@pytest.fixture(autouse=True)
def fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def _modified_softmax(x):
    """A non-leaf whose grad_fn (Softmax) saved a result that was then modified: running
    that node raises, in eager as in refcomp."""
    v = x.softmax(0)
    v.tanh_()
    return v


def _loss_grad(fn, loss_of):
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    outs = fn(x, _modified_softmax(x))
    try:
        (g,) = torch.autograd.grad(loss_of(outs), [x])
    except RuntimeError as e:
        return e
    return g


def _reads_v_for_nothing_differentiable(x, v):
    n = (v > 0).sum()  # v is read, but no floating result depends on it
    return x * 2, n


def _returns_both(x, v):
    return x * 2, v * 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_no_output_depends_on_gets_no_edge(backend):
    # Eager's x * 2 has no edge to v's Softmax node, so nothing raises.
    want = _loss_grad(_reads_v_for_nothing_differentiable, lambda o: o[0].sum())
    got = _loss_grad(refcomp.compile(_reads_v_for_nothing_differentiable, backend=backend),
                     lambda o: o[0].sum())
    assert isinstance(want, torch.Tensor), want
    assert isinstance(got, torch.Tensor), got
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_that_depends_on_it_still_raises_eagers_error(backend):
    want = _loss_grad(_returns_both, lambda o: o[0].sum() + o[1].sum())
    got = _loss_grad(refcomp.compile(_returns_both, backend=backend),
                     lambda o: o[0].sum() + o[1].sum())
    assert isinstance(want, RuntimeError)
    assert isinstance(got, RuntimeError), got
    assert "modified by an inplace operation" in str(got)


@pytest.mark.parametrize("backend", [
    "eager",
    pytest.param("interp", marks=pytest.mark.xfail(
        strict=True, reason="one Function per graph: an edge to every input some output"
        " depends on, run by autograd even when only other outputs get a gradient"
        " (spec/autograd.md, limits)")),
    pytest.param("llvm", marks=pytest.mark.xfail(
        strict=True, reason="one Function per graph (spec/autograd.md, limits)")),
])
def test_input_only_outputs_without_gradient_depend_on(backend):
    # The loss reads x * 2 only: eager never reaches v's Softmax node.
    want = _loss_grad(_returns_both, lambda o: o[0].sum())
    got = _loss_grad(refcomp.compile(_returns_both, backend=backend), lambda o: o[0].sum())
    assert isinstance(want, torch.Tensor), want
    assert isinstance(got, torch.Tensor), got
    torch.testing.assert_close(got, want)
