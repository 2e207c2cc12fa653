"""`masked_fill_` and `fill_` under grad (issue 33): table entries whose new value is
`where(mask, value, x)` / `value` broadcast, written by the in-place machinery (Note
[In-place under grad]) -- captured with eager's values and gradients, where they were
opaque calls whose meta run refused the leaf (RB004, the frame split)."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def masked_fill_intermediate(x, w):
    h = x * w
    h.masked_fill_(x > 0, 0.5)
    return (h * w).sum()


def masked_fill_tensor_value(x, w):
    h = x + 1
    h.masked_fill_(x < 0, w.sum())
    return (h * h).sum()


def fill_a_view(x, w):
    h = x * w
    h[:, 0].fill_(1.5)
    return (h * w).sum()


def fill_a_view_with_a_tensor(x, w):
    h = x * w
    h[1].fill_(w[0, 0] * 2)
    return (h * w).sum()


def masked_fill_a_view(x, w):
    h = x * w + 1  # (tanh would save h for its backward: eager raises there, RB010 here)
    h.t()[1:].masked_fill_(x.t()[1:] > 0.2, -1.0)
    return (h * x).sum()


CASES = [masked_fill_intermediate, masked_fill_tensor_value, fill_a_view,
         fill_a_view_with_a_tensor, masked_fill_a_view]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_fill_under_grad_is_one_graph_with_eagers_gradients(fn, backend):
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    w = torch.randn(4, 3, requires_grad=True)
    refcomp.reset()
    report = refcomp.explain(fn, x, w)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    want = fn(x, w)
    (g_want,) = torch.autograd.grad(want, w)
    compiled = refcomp.compile(fn, backend=backend)
    got = compiled(x, w)
    (g_got,) = torch.autograd.grad(got, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(g_got, g_want)
    got.detach()
    w.grad = None
    compiled(x, w).backward()  # .backward() accumulates the same gradient
    torch.testing.assert_close(w.grad, g_want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fill_of_a_leaf_that_requires_grad_raises_as_in_eager(backend):
    def f(w):
        w.fill_(1.0)
        return w * 2

    w = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        f(w)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        refcomp.compile(f, backend=backend)(w)
    assert not torch.equal(w.detach(), torch.ones(3))
