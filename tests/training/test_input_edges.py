"""Which inputs a compiled graph's autograd node has edges to (Note [Inputs no gradient
reaches], spec/autograd.md).  Autograd runs every node an edge
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_only_outputs_without_gradient_depend_on(backend):
    # The loss reads x * 2 only: eager never reaches v's Softmax node.
    want = _loss_grad(_returns_both, lambda o: o[0].sum())
    got = _loss_grad(refcomp.compile(_returns_both, backend=backend), lambda o: o[0].sum())
    assert isinstance(want, torch.Tensor), want
    assert isinstance(got, torch.Tensor), got
    torch.testing.assert_close(got, want)


def _three_ways(x, v, w):
    # Outputs that depend on different non-leaf inputs: one node per dependency set
    # (Note [One node per dependency set]); a shared leaf x; an integer output.
    a = (x * v).exp()
    b = (x * w).sin()
    c = (v + w).tanh()
    return a, b, c, (w > 0).sum()


def _non_leaves(x, modify):
    v = (x * 1.5).softmax(0)
    w = (x - 0.25).sigmoid()
    if modify:
        v.tanh_()
    return v, w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)])
def test_gradients_of_outputs_on_different_non_leaves_equal_eagers(backend, loss):
    compiled = refcomp.compile(_three_ways, backend=backend)
    for modify in (False, True):
        results = []
        for fn in (_three_ways, compiled):
            x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
            outs = fn(x, *_non_leaves(x, modify))
            assert outs[3].grad_fn is None and not outs[3].requires_grad
            try:
                results.append(torch.autograd.grad(sum(outs[i].sum() * (i + 1) for i in loss),
                                                   [x]))
            except RuntimeError as e:
                results.append(e)
        want, got = results
        if isinstance(want, RuntimeError):
            assert isinstance(got, RuntimeError), (modify, got)
            assert "modified by an inplace operation" in str(got)
        else:
            assert not isinstance(got, RuntimeError), (modify, got)
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_nodes_per_dependency_set_keep_autograds_rules(backend):
    compiled = refcomp.compile(_three_ways, backend=backend)
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    a, b, c, _ = compiled(x, *_non_leaves(x, False))
    assert a.grad_fn is not b.grad_fn  # two nodes: a depends on v, b on w
    loss = (a.sum() + b.sum() + c.sum())
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    # create_graph: gradients that carry a graph, as eager's (the recompute needs the
    # inputs alive: Note [Double backward])
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    vw = _non_leaves(x, False)
    (g,) = torch.autograd.grad(sum(o.sum() for o in compiled(x, *vw)[:3]),
                               [x], create_graph=True)
    x2 = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    (g2,) = torch.autograd.grad(sum(o.sum() for o in _three_ways(x2, *_non_leaves(x2, False))[:3]),
                                [x2], create_graph=True)
    torch.testing.assert_close(g, g2)
    torch.testing.assert_close(torch.autograd.grad(g.sum(), [x])[0],
                               torch.autograd.grad(g2.sum(), [x2])[0])
