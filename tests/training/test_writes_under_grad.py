"""In-place writes under grad that once broke or crashed (issue 33): each case runs
eagerly and compiled on every CPU backend, and the outputs, the gradients of the inputs
that require grad and the graph/break counts where the case says them are compared."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def _grads(fn, args):
    """(outputs, gradients of the args that require grad) of one run; the gradient of
    sum(out * a fixed weight) over the outputs that require grad."""
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    diff = [o for o in outs if o.requires_grad]
    if not diff:
        return outs, []
    loss = sum((o * torch.linspace(-1, 2, o.numel()).reshape(o.shape)).sum() for o in diff)
    return outs, torch.autograd.grad(loss, leaves, allow_unused=True)


def assert_like_eager(fn, make_args, backend):
    torch.manual_seed(0)
    args = make_args()
    want, g_want = _grads(fn, [a.clone().requires_grad_(a.requires_grad) if a.is_leaf
                               else a for a in args])
    refcomp.reset()
    got, g_got = _grads(refcomp.compile(fn, backend=backend), args)
    torch.testing.assert_close(got, want)
    assert len(g_got) == len(g_want)
    for g, w in zip(g_got, g_want):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w)


def empty_view_of_output_written_after_break(x):
    w = x.clone()
    w[None].mul_(3)    # through a view: the graph's output is a view of a kernel buffer
    _ = x.sum().item()  # RB002
    w[None].mul_(2)    # in CPython, on the compiled Function's output
    return w


def augmented_item_assignment_covering_all(x):
    w = x.clone()
    w[None] *= 3       # mul_ through the view; the store after it writes nothing
    return w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [0, 3])
def test_write_after_break_into_an_output_of_the_compiled_function(backend, rows):
    # corpus grad_empty_view_of_output_written_at_break_llvm: an empty output's storage
    # has address 0, as the input's does, so the view was not detached (llvm)
    assert_like_eager(empty_view_of_output_written_after_break,
                      lambda: [torch.randn(rows, 3, requires_grad=True)], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [0, 3])
def test_augmented_item_assignment_covering_all_is_one_graph(backend, rows):
    x = torch.randn(rows, 3, requires_grad=True)
    refcomp.reset()
    report = refcomp.explain(augmented_item_assignment_covering_all, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert_like_eager(augmented_item_assignment_covering_all, lambda: [x], backend)
