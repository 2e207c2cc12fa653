"""Mutated graph inputs stored in place by their kernel (spec/memory.md, "Graph inputs
written in place"; Note [Inputs written in place], codegen/runtime.py): the llvm
backend stores an optimizer's new parameters and state into the caller's tensors, and
every case the plan refuses keeps the copy after the call.  Each case equals eager."""

import inspect

import pytest
import torch
import torch.nn as nn

import refcomp
from refcomp.cache import all_caches


def into_entries() -> list:
    """(printed value, input name, why) of every `into` of the compiled llvm graphs."""
    from ir.printer import value_names

    out = []
    for cache in all_caches().values():
        for entry in cache.entries:
            compiled = getattr(inspect.unwrap(entry.fn), "compiled", None) if entry.fn else None
            if compiled is None or compiled.graph.plan is None:
                continue
            names = value_names(compiled.graph)
            out += [(names[i.value], names[i.input], i.why) for i in compiled.graph.plan.into]
    return out


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))


OPTIMIZERS = {
    "adamw": lambda ps, foreach: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1,
                                                   foreach=foreach),
    "sgd_momentum": lambda ps, foreach: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                        foreach=foreach),
}


def _steps(name, foreach, compiled, steps=5):
    model = _model()
    ps = list(model.parameters())
    opt = OPTIMIZERS[name](ps, foreach)

    def step():
        torch.nn.utils.clip_grad_norm_(ps, 0.5)
        opt.step()
    fn = refcomp.compile(step) if compiled else step
    g = torch.Generator().manual_seed(3)
    history = []
    for _ in range(steps):
        for p in ps:  # a new gradient per step, as backward would leave
            p.grad = torch.randn(p.shape, generator=g)
        fn()
        history.append([p.detach().clone() for p in ps] + [
            v.clone() for p in ps for v in opt.state[p].values() if isinstance(v, torch.Tensor)])
    return history


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_write_parameters_in_place_and_equal_eager(name, foreach):
    refcomp.reset()
    got = _steps(name, foreach, True)
    want = _steps(name, foreach, False)
    for step_got, step_want in zip(got, want):
        assert len(step_got) == len(step_want)
        for a, b in zip(step_got, step_want):
            torch.testing.assert_close(a, b)
    into = into_entries()
    written = {target for _, target, why in into if not why}
    # every parameter and its gradient (clipped) are stored in place, and the state
    params = {f"%C_ps_{i}" for i in range(6)}
    assert params | {p + ".grad" for p in params} < written, into


def test_an_input_read_before_and_after_its_write():
    def f(a, b):
        old = a * b
        a.add_(1)
        return a * old, a.sum()

    refcomp.reset()
    cf = refcomp.compile(f)
    b = torch.randn(64, 32)
    a, a2 = torch.randn(64, 32), None
    a2 = a.clone()
    for _ in range(3):
        got, want = cf(a, b), f(a2, b)
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y)
        torch.testing.assert_close(a, a2)
        assert a._version == a2._version  # the write counts as eager's one add_


def test_an_input_written_twice():
    def f(a, b):
        a.add_(1)
        a.mul_(b)
        return a.exp()

    refcomp.reset()
    a, b = torch.randn(8, 128), torch.randn(8, 128)
    a2 = a.clone()
    for _ in range(2):
        torch.testing.assert_close(refcomp.compile(f)(a, b), f(a2, b))
        torch.testing.assert_close(a, a2)
    assert [why for *_, why in into_entries()] == [""]


def test_a_transposed_input_is_copied_back():
    def f(a, b):
        a.mul_(2).add_(b)
        return a.sum(0)

    refcomp.reset()
    a, b = torch.randn(32, 16).t(), torch.randn(16, 32)
    a2 = a.clone().t().contiguous().t()  # the same strides
    for _ in range(2):
        torch.testing.assert_close(refcomp.compile(f)(a, b), f(a2, b))
        torch.testing.assert_close(a, a2)
    assert a.stride() == (1, 16)


def test_inputs_that_are_views_of_one_base():
    def f(a, b):
        a.add_(1)
        return b * 2

    refcomp.reset()
    base, base2 = torch.randn(4, 8), None
    base2 = base.clone()
    for _ in range(2):
        torch.testing.assert_close(refcomp.compile(f)(base, base[0]), f(base2, base2[0]))
        torch.testing.assert_close(base, base2)


def test_an_input_written_and_returned():
    def f(a, b):
        a.mul_(b)
        return a

    refcomp.reset()
    a, b = torch.randn(256), torch.randn(256)
    a2 = a.clone()
    got = refcomp.compile(f)(a, b)
    assert got is a and torch.equal(a, f(a2, b))


def test_an_old_value_kept_by_a_clone_is_not_overwritten():
    def f(a):
        old = a.clone()
        a.add_(1)
        return old

    refcomp.reset()
    a = torch.randn(256)
    a2 = a.clone()
    torch.testing.assert_close(refcomp.compile(f)(a), f(a2))
    torch.testing.assert_close(a, a2)


def test_a_parameter_saved_for_backward_then_written_raises_as_eager():
    # The write bumps the version as the copy it replaces did: backward sees the change.
    def update(p, g):
        with torch.no_grad():
            p.sub_(0.1 * g)

    refcomp.reset()
    for fn in (update, refcomp.compile(update)):
        p = nn.Parameter(torch.randn(64))
        loss = (p * p).sum()
        fn(p, torch.randn(64))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_a_window_written_into_an_input_stores_the_window_only():
    def f(x, y):
        x[:, ::2] = y
        x[:, 1::2] *= 3
        return y.sum()

    refcomp.reset()
    x, y = torch.randn(64, 64), torch.randn(64, 32)
    x2 = x.clone()
    torch.testing.assert_close(refcomp.compile(f)(x, y), f(x2, y))
    assert torch.equal(x, x2)
    assert [why for *_, why in into_entries()] == [""]


def test_dynamic_sizes():
    def f(a, b):
        a.mul_(b).add_(1)
        return a * 2

    refcomp.reset()
    cf = refcomp.compile(f, dynamic=True)
    for n in (8, 12, 20):
        a, b = torch.randn(n, 16), torch.randn(n, 16)
        a2 = a.clone()
        torch.testing.assert_close(cf(a, b), f(a2, b))
        torch.testing.assert_close(a, a2)
    assert [why for *_, why in into_entries()] == [""]


def _copy_then_source_written(x0, x1):
    x1.copy_(x0)
    x0.add_(x0)
    return x0


def _copy_of_view_then_source_written(x0, x1):
    x1.copy_(x0.t())
    x0.mul_(3)
    return x1.sum()


def _swap(x0, x1):
    old = x0.clone()
    x0.copy_(x1)
    x1.copy_(old)
    return x0 + x1


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("fn", [_copy_then_source_written, _copy_of_view_then_source_written,
                                _swap])
def test_write_back_source_that_is_another_written_input(fn, backend):
    """Note [Write-back sources]: x1's new value is x0's old value (or its view); x0 is
    written back too, and x1 got x0's new value (corpus
    copy_into_input_then_source_written)."""
    refcomp.reset()
    a = torch.arange(9.0).reshape(3, 3)
    b = torch.zeros(3, 3) - 1
    want = fn(a.clone(), b.clone())
    a2, b2 = a.clone(), b.clone()
    fn(a, b)
    got = refcomp.compile(fn, backend=backend)(a2, b2)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(a2, a)
    torch.testing.assert_close(b2, b)
