"""A break keeps the ops before it as a graph (issue 33, item 3): a view of an
intermediate live at the break beside its base is rebuilt after the graph as a view of
the base's output (Note [Views of outputs]), so the frame no longer runs wholly in eager
("two live tensors share storage at the break"); a metadata change in place on an input
(`x.unsqueeze_(0)`) is a break after the ops before it (spec/runtime.md, "Frames that
run eagerly instead")."""

import pytest
import torch

import refcomp
from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


def view_beside_base_at_item(x):
    v1 = x.abs() + 1
    v4 = v1.unsqueeze(-1).transpose(0, 1)
    s = v1.sum().item()
    return v1 * s, v4


def view_beside_base_written_after(x):
    v1 = x * 2
    v2 = v1.t()
    _ = x.sum().item()
    v1.add_(1)  # after the break: v2 sees it, as in eager
    return v2


def two_views_base_dead(x):
    t = x + 1
    a, b = t[0], t.view(-1)
    del t
    _ = x.sum().item()
    a.mul_(3)  # b sees it
    return b


def metadata_inplace_on_input(x):
    y = x * 2
    x.unsqueeze_(0)
    return y, x.shape


def metadata_inplace_transpose_on_input(x, w):
    y = x @ w
    x.t_()
    return y + x.sum(), x


CASES = [(view_beside_base_at_item, lambda: (torch.randn(3, 4),)),
         (view_beside_base_written_after, lambda: (torch.randn(3, 4),)),
         (two_views_base_dead, lambda: (torch.randn(3, 4),)),
         (metadata_inplace_on_input, lambda: (torch.randn(3, 4),)),
         (metadata_inplace_transpose_on_input, lambda: (torch.randn(3, 4), torch.randn(4, 4)))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f,make", CASES, ids=[f.__name__ for f, _ in CASES])
def test_like_eager(f, make, backend):
    assert_like_eager(f, make, backend)


@pytest.mark.parametrize("f,make", CASES, ids=[f.__name__ for f, _ in CASES])
def test_prefix_is_a_graph(f, make):
    refcomp.reset()
    report = refcomp.explain(f, *make(), backend="eager")
    assert report.graph_break_count >= 1
    assert report.graph_count >= 1, report.break_reasons


def test_rebuilt_view_aliases_its_base():
    def f(x):
        v1 = x + 1
        v2 = v1.view(-1)
        _ = x.sum().item()
        return v1, v2

    v1, v2 = refcomp.compile(f)(torch.randn(2, 3))
    assert v2.untyped_storage().data_ptr() == v1.untyped_storage().data_ptr()


def test_ellipsis_on_the_stack_crosses_a_break():
    """`x[...] += 1` on an input breaks at the add_ (a view of an input: RB010) with `x`
    and `...` on the stack for the store after it; the Ellipsis had no recipe ("a
    ellipsis built while tracing"), so the whole frame ran in eager (fuzzer, seed 7)."""
    def f(x0, x1):
        x0[...] += 1
        return x1.view_as(x1) * 2

    refcomp.reset()
    report = refcomp.explain(f, torch.ones(3), torch.ones(4))
    assert not any("whole frame in eager" in n for n in report.notes), report.notes
    assert report.graph_count >= 1
    for backend in BACKENDS:
        assert_like_eager(f, lambda: (torch.ones(3), torch.ones(4)), backend)
