"""A branch on a 0-d bool tensor whose one side only raises an exception made from
constants is a runtime check, not a break (Note [Raising branches],
refcomp/tracer/raise_checks.py; spec/correctness.md, "Exceptions"): one graph, and the
entry raises eager's exception type and message, with the inputs as eager leaves them."""

import pytest
import torch
import torch.nn.functional as F

import refcomp
from refcomp.reasons import TENSOR_CONTROL_FLOW
from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


class PlainError(ValueError):
    pass


class BuiltError(ValueError):
    def __init__(self, msg):
        super().__init__(msg)


def validate(x):
    if torch.any(x < 0):
        raise ValueError("x has negative entry/entries")
    return x * 2


# compiled from text: pytest rewrites the `assert` statements of a test module
exec(compile("def asserted(x):\n"
             "    assert (x >= 0).all(), 'x must be non-negative'\n"
             "    return x + 1\n", __file__, "exec"), globals())


def negated(x):
    if not (x >= 0).all():
        raise KeyError
    return x.sum()


def own_class(x):
    if (x < 0).any():
        raise PlainError("negative", 3)
    return x - 1


def writes_after(x, y):
    if (x < 0).any():
        raise ValueError("negative")
    y.add_(1)
    return x * y


def div_then_check(a, b):
    q = a // b  # a runtime check of its own (ZeroDivisionError), earlier in program order
    if (a < 0).any():
        raise ValueError("negative")
    return q


def check_then_div(a, b):
    if (a < 0).any():
        raise ValueError("negative")
    return a // b


def check_then_aten(a, b):
    if (a < 0).any():
        raise ValueError("negative")
    return torch.index_select(a, 0, b)  # may raise inside the graph (the eager backend)


CAPTURED = {"validate": validate, "asserted": asserted,  # noqa: F821 "negated": negated,
            "own_class": own_class}


def _explain(f, *args, backend):
    return refcomp.explain(f, *args, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_raising_branch_is_one_graph_and_raises_like_eager(name, backend):
    f = CAPTURED[name]
    ex = _explain(f, torch.rand(3, 4), backend=backend)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    x = torch.rand(3, 4)
    torch.testing.assert_close(cf(x), f(x))
    bad = x - 2
    with pytest.raises(Exception) as want:
        f(bad)
    with pytest.raises(type(want.value)) as got:
        cf(bad)
    assert type(got.value) is type(want.value) and got.value.args == want.value.args
    torch.testing.assert_close(cf(x + 1), f(x + 1))  # the same entry, not raising
    assert sum(e["hits"] for fr in refcomp.stats()["frames"].values() for e in fr) >= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_gaussian_nll_loss_validates_var_in_the_graph(backend):
    # torch.nn.functional.gaussian_nll_loss: `if torch.any(var < 0): raise ValueError(...)`
    def f(i, t, v):
        return F.gaussian_nll_loss(i, t, v)

    i, t, v = torch.randn(3, 4), torch.randn(3, 4), torch.rand(3, 4)
    ex = _explain(f, i, t, v, backend=backend)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons
    assert_like_eager(f, lambda: (torch.randn(3, 4), torch.randn(3, 4), torch.rand(3, 4)),
                      backend)
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    with pytest.raises(ValueError, match="^var has negative entry/entries$"):
        cf(i, t, v - 0.5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_write_back_and_no_replayed_effect_after_a_check_that_fires(backend):
    log = []

    def f(x, y):
        if (x < 0).any():
            raise ValueError("negative")
        y.add_(1)
        log.append(1)  # a side effect replayed after the graph
        return x * y

    ex = _explain(f, torch.rand(3), torch.rand(3), backend=backend)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, ex.break_reasons
    log.clear()
    assert_like_eager(writes_after, lambda: (torch.rand(3) - 0.5, torch.rand(3)), backend)
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    y = torch.ones(3)
    cf(torch.rand(3), y)
    assert y.tolist() == [2.0] * 3 and log == [1]
    with pytest.raises(ValueError, match="negative"):
        cf(-torch.rand(3) - 1, y)
    assert y.tolist() == [2.0] * 3 and log == [1]  # as eager: neither happened


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_break_after_the_check_does_not_run(backend, capsys):
    def f(x):
        if (x < 0).any():
            raise ValueError("negative")
        print("after the check")
        return x + 1

    cf = refcomp.compile(f, backend=backend)
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    cf(torch.rand(2))
    assert "after the check" in capsys.readouterr().out
    with pytest.raises(ValueError, match="negative"):
        cf(-torch.ones(2))
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [div_then_check, check_then_div, check_then_aten])
def test_checks_raise_in_program_order(f, backend):
    a = torch.tensor([-4, 6])
    zero = torch.tensor([2, 9] if f is check_then_aten else [2, 0])  # 9: out of range
    assert_like_eager(f, lambda: (a.clone(), zero.clone()), backend)
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    with pytest.raises(Exception) as want:
        f(a, zero)
    with pytest.raises(Exception) as got:
        cf(a, zero)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)


def _mutates_first(x, y):
    y.add_(1)  # eager has written y when it raises
    if (x < 0).any():
        raise ValueError("negative")
    return x * y


def _effect_first(x, log=[]):  # noqa: B006 (a list outliving the call)
    log.append(1)
    if (x < 0).any():
        raise ValueError("negative")
    return x * 2


def _grad_switched(x):
    torch.set_grad_enabled(False)  # eager has switched grad mode off when it raises
    if (x < 0).any():
        raise ValueError("negative")
    return x * 2


def _caught(x):
    try:
        if (x < 0).any():
            raise ValueError("negative")
    except ValueError:
        return x * 0
    return x * 2


def _formatted(x):
    if (x < 0).any():
        raise ValueError(f"negative in {x.shape}")
    return x * 2


def _built(x):
    if (x < 0).any():
        raise BuiltError("negative")
    return x * 2


def _draws_after(x):
    if (x < 0).any():
        raise ValueError("negative")
    return x + torch.rand(3)


STILL_BREAKS = {"mutates_first": _mutates_first, "effect_first": _effect_first,
                "caught": _caught, "formatted": _formatted, "built": _built,
                "draws_after": _draws_after, "grad_switched": _grad_switched}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(STILL_BREAKS))
def test_refused_raising_branches_break_and_match_eager(name, backend):
    f = STILL_BREAKS[name]
    n_args = f.__code__.co_argcount - len(f.__defaults__ or ())
    make = (lambda: (torch.rand(3) - 0.5, torch.rand(3))[:n_args])
    ex = _explain(f, *(a.abs() for a in make()), backend=backend)
    torch.set_grad_enabled(True)  # _grad_switched leaves it off, as in eager
    assert [r["id"] for r in ex.break_reasons] == [TENSOR_CONTROL_FLOW], ex.break_reasons
    for sign in (1, -1):  # not raising, raising
        torch.manual_seed(0)
        args_e = tuple(a.abs() * sign for a in make())
        torch.manual_seed(0)
        args_c = tuple(a.abs() * sign for a in make())
        refcomp.reset()
        cf = refcomp.compile(f, backend=backend)
        for _ in range(2):
            torch.set_grad_enabled(True)
            torch.manual_seed(1)
            try:
                want, err = f(*args_e), None
            except ValueError as e:
                want, err = None, e
            state_e = torch.get_rng_state()
            grad_e = torch.is_grad_enabled()
            torch.set_grad_enabled(True)
            torch.manual_seed(1)
            try:
                got, got_err = cf(*args_c), None
            except ValueError as e:
                got, got_err = None, e
            assert str(got_err) == str(err)
            assert torch.is_grad_enabled() == grad_e  # grad mode as eager left it
            torch.set_grad_enabled(True)
            assert torch.equal(torch.get_rng_state(), state_e)  # drew what eager drew
            if want is not None:
                torch.testing.assert_close(got, want)
            for a, b in zip(args_c, args_e):
                torch.testing.assert_close(a, b)
