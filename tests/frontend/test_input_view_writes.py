"""Writes through a view of a graph input are captured (issue 33, Note [Writes through
views of a graph input] in refcomp/tracer/mutation.py): one graph, the input written back
once, the caller's tensor and every view of it equal to eager's after the call."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def strided_mul(a):
    a[:, 1::2].mul_(3)
    return a.sin()


def named_view(a):
    v = a[:, 1::2]
    v.mul_(3)
    return a.sin() + v.sum()


def narrow_add(a):
    a[1:].add_(1)
    return a * 2


def diagonal_fill(a):
    a.diagonal().fill_(7)
    return a.sum()


def flat_view(a):
    a.view(-1).mul_(2)
    return a + 1


def other_views_follow(a):
    row, col = a[0], a[:, 0]
    col.mul_(2)
    return row + 0, col * 1


def item_assignment_of_a_view(a, y):
    a.t()[1:3] = y
    return a.cos()


def returns_the_view(a):
    v = a[1:]
    v.add_(1)
    return v


PROGRAMS = [strided_mul, named_view, narrow_add, diagonal_fill, flat_view,
            other_views_follow, item_assignment_of_a_view, returns_the_view]


def _args(fn, layout):
    a = torch.randn(6, 6)
    if layout == "transposed":
        a = a.t()
    return [a] + ([torch.randn(2, 6)] if fn is item_assignment_of_a_view else [])


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_write_through_a_view_of_an_input_is_one_graph(fn, backend, layout):
    args = _args(fn, layout)
    eager_args = [a.clone() for a in args]
    eager_args[0] = args[0].clone() if layout == "contiguous" else args[0].t().clone().t()
    if fn is flat_view and layout == "transposed":  # eager raises: view of a transpose
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            fn(*eager_args)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            refcomp.compile(fn, backend=backend)(*args)
        torch.testing.assert_close(args[0], eager_args[0])
        return
    want = fn(*eager_args)
    report = refcomp.explain(fn, backend=backend)(*[a.clone() for a in args])
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    refcomp.reset()
    got = refcomp.compile(fn, backend=backend)(*args)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(args[0], eager_args[0])  # the input after the call
    if fn is returns_the_view:  # a view of the caller's tensor, as eager's
        assert got._base is args[0] or got.data_ptr() == args[0][1:].data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_callers_view_and_an_input_view_see_the_write(backend):
    big = torch.randn(8, 6)
    big_e = big.clone()
    held, held_e = big[0], big_e[0]  # the caller's view of the storage
    narrow_add(big_e[2:])
    refcomp.compile(narrow_add, backend=backend)(big[2:])
    torch.testing.assert_close(big, big_e)
    torch.testing.assert_close(held, held_e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_sharing_storage_keep_the_break(backend):
    def f(a, b):
        a[1:].add_(1)
        return b * 2

    a = torch.randn(5, 5)
    a_e = a.clone()
    want = f(a_e, a_e.t())
    compiled = refcomp.compile(f, backend=backend)
    got = compiled(a, a.t())
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(a, a_e)
    report = refcomp.explain(f, backend=backend)(a.clone(), a.clone())  # distinct: captured
    assert report.graph_break_count == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_under_grad_a_write_through_an_input_view_breaks_and_raises_as_eager(backend):
    def f(w):
        w[1:].mul_(2)
        return w.sum()

    w = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        f(w)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        refcomp.compile(f, backend=backend)(w)
    report = refcomp.explain(f, backend=backend)
    with pytest.raises(RuntimeError):
        report(w)
    refcomp.reset()
    with torch.no_grad():  # no grad: captured
        w2 = w.detach().clone()
        w2_e = w2.clone()
        want = f(w2_e)
        got = refcomp.compile(f, backend=backend)(w2)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(w2, w2_e)


def test_a_module_buffer_written_through_a_view():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("hist", torch.zeros(3, 4))

        def forward(self, x):
            self.hist[0] += x.sum(0)
            self.hist[:, 1].fill_(1)
            return x * 2

    m, m_e = Counter(), Counter()
    x = torch.randn(5, 4)
    compiled = refcomp.compile(m, backend="llvm")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), m_e(x))
        torch.testing.assert_close(m.hist, m_e.hist)
    assert refcomp.explain(Counter(), backend="llvm")(x).graph_break_count == 0


@pytest.mark.parametrize("fn", [narrow_add, strided_mul, diagonal_fill, other_views_follow],
                         ids=lambda f: f.__name__)
def test_dynamic_sizes_write_through_input_views_as_eager(fn):
    compiled = refcomp.compile(fn, dynamic=True)
    for n in (6, 7, 9):
        a = torch.randn(n, n)
        a_e = a.clone()
        torch.testing.assert_close(compiled(a), fn(a_e))
        torch.testing.assert_close(a, a_e)
