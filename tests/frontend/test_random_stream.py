"""Random draws, seeds and saved generator states in the graph (spec/tracer.md, "Random
draws"; Note [Random stream in program order] in refcomp/tracer/rng.py).

Every check compares with eager from the same generator state: the compiled call must
draw the same numbers, fresh on every call, and leave the generator where eager leaves it.
"""

import pytest
import torch
import torch.nn.functional as F
from torch.testing._utils import freeze_rng_state, wrapper_set_seed

import refcomp

BACKENDS = ["llvm", "eager", "interp"]


def _twice_equal_eager(f, args, backend):
    """Run compiled and eager twice each from the same generator states; return the
    compiled function's explain() report."""
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    torch.manual_seed(123)
    got = [cf(*args), cf(*args)]
    got_state = torch.get_rng_state()
    torch.manual_seed(123)
    want = [f(*args), f(*args)]
    assert torch.equal(got_state, torch.get_rng_state()), "the generator ends elsewhere"
    for g, w in zip(got, want):
        g, w = (g, w) if isinstance(g, tuple) else ((g,), (w,))
        for a, b in zip(g, w):
            assert torch.equal(a, b)
    return refcomp.explain(f, *args, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_opaque_draws_in_one_graph_draw_fresh_numbers_each_call(backend):
    def f(x):
        a = torch.bernoulli(x)              # aten draws, in program order
        b = torch.normal(x, 2.0)
        c = torch.randn(3, 4) + a           # the IR's own random op between them
        return a, b, c, torch.empty_like(x).uniform_(-1, 1)

    x = torch.rand(3, 4)
    report = _twice_equal_eager(f, (x,), backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert 'fn="torch.bernoulli"' in report.graphs[0] and "rng=true" in report.graphs[0]
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    first, second = cf(x), cf(x)
    assert not torch.equal(first[1], second[1])  # not a constant baked in at trace time


@pytest.mark.parametrize("backend", BACKENDS)
def test_manual_seed_and_saved_states_in_the_graph(backend):
    def f(x):
        torch.manual_seed(7)
        a = torch.rand_like(x)
        s = torch.get_rng_state()
        b = torch.bernoulli(x)
        torch.set_rng_state(s)              # b's draw again
        c = torch.bernoulli(x)
        return a, b, c, F.dropout(x, 0.5, training=True)  # the table's dropout_mask

    x = torch.rand(5, 5)
    report = _twice_equal_eager(f, (x,), backend)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    a, b, c, _ = report.result
    assert torch.equal(b, c)


@pytest.mark.parametrize("backend", BACKENDS)
def test_freeze_rng_state_restores_the_callers_stream(backend):
    # OpInfo's wrapper: `with freeze_rng_state(): torch.manual_seed(42); op(...)`.
    def f(x):
        return wrapper_set_seed(torch.bernoulli, x) * 2

    def g(x):
        with freeze_rng_state():
            y = torch.empty_like(x).exponential_()
        return y + torch.poisson(x)         # drawn after the restore

    x = torch.rand(4, 3)
    for fn in (f, g):
        report = _twice_equal_eager(fn, (x,), backend)
        assert (report.graph_count, report.graph_break_count) == (1, 0), report
        assert 'fn="torch.set_rng_state"' in report.graphs[0]


def test_gradients_through_random_ops_equal_eager():
    def f(x):
        torch.manual_seed(1)
        return (F.alpha_dropout(x, 0.5, True) * 2 + F.rrelu(x, training=True)).sum()

    x = torch.randn(8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    report = refcomp.explain(f, x, backend="llvm")
    assert report.graph_break_count == 0
    refcomp.reset()
    got = refcomp.compile(f, backend="llvm")(x)
    got.backward()
    want = f(x2)
    want.backward()
    assert torch.equal(got, want) and torch.equal(x.grad, x2.grad)


GEN = torch.Generator().manual_seed(0)


@pytest.mark.parametrize("fn, what", [
    (lambda x: torch.bernoulli(x, generator=GEN) * 2, "generator object"),
    (lambda x: (torch.manual_seed(int(x.sum())), x + 1)[1], "item"),
    (lambda x: (torch.seed(), x + 1)[1], "torch.random.seed"),
])
def test_what_the_graph_cannot_draw_exactly_breaks_naming_it(fn, what):
    x = torch.rand(4)
    report = refcomp.explain(fn, x)
    assert report.graph_break_count >= 1
    assert what in report.break_reasons[0]["reason"], report.break_reasons[0]


def test_builtins_that_random_low_rank_helpers_use():
    # torch.svd_lowrank: set(map(type, tensors)).issubset(...); pca_lowrank: type(A)
    def f(x, p):
        kinds = set(map(type, (x, p, None)))
        ok = kinds.issubset((torch.Tensor, torch.nn.Parameter, type(None)))
        return x * 2 if ok and type(p) is torch.nn.Parameter else x

    x, p = torch.randn(3), torch.nn.Parameter(torch.randn(3))
    report = refcomp.explain(f, x, p)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, x * 2)


def test_a_draw_reading_a_fused_value_stays_before_a_later_seed():
    # Regression (llvm): fusion moved the region x * 0.5 -- and the bernoulli that reads
    # it -- after manual_seed, because the region also fed y * rand_like(x).
    def f(x):
        y = x * 0.5
        a = torch.bernoulli(y)
        torch.manual_seed(0)
        return a, y * torch.rand_like(x) + 1

    report = _twice_equal_eager(f, (torch.rand(64),), "llvm")
    assert report.graph_break_count == 0


# Note [Random draws in eager's layout] (refcomp/tracer/eager_layout.py): eager fills a
# tensor in its memory order, so on a transposed, permuted or channels_last tensor the
# same draws land elsewhere than on a row-major one; found by the OpInfo layout run
# (`normal.in_place` on a transposed input) and then in rand_like, randn_like, dropout.
def _draws_on_transposed(x):
    return torch.rand_like(x) + x


def _randn_like_of_permuted_intermediate(x):
    y = x.permute(2, 0, 1) * 2            # 24 elements: normal_'s block fill when row-major
    return torch.randn_like(y) + y


def _dropout_of_transposed(x):
    return F.dropout(x, 0.5) * 3


def _dropout_of_channels_last(x):
    return F.dropout(x.reshape(1, 2, 3, 4).contiguous(memory_format=torch.channels_last), 0.25)


def _inplace_draws_on_views(x):
    y = x * 1                             # row-major in eager; a view of x on llvm
    y.transpose(0, 2).normal_(0.0, 2.0)   # in place through a transposed view
    z = x.permute(2, 1, 0).clone()
    z.uniform_(-1, 1)
    return y, z, torch.bernoulli(z.abs().clamp(max=1))


def _inplace_draw_on_folded_transpose(x):
    y = x.t() * 1                         # the IR folds `* 1`: llvm hands ATen a view
    y.uniform_()
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f, shape", [
    (_draws_on_transposed, "t"), (_randn_like_of_permuted_intermediate, (2, 3, 4)),
    (_dropout_of_transposed, "t"), (_dropout_of_channels_last, (2, 3, 4)),
    (_inplace_draws_on_views, (2, 3, 4)), (_inplace_draw_on_folded_transpose, (4, 5)),
    (_inplace_draw_on_folded_transpose, "t")])
def test_draws_land_where_eager_puts_them_in_any_layout(f, shape, backend):
    x = torch.randn(5, 4).t() if shape == "t" else torch.randn(shape)
    _twice_equal_eager(f, (x,), backend)
