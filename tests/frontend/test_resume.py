"""Constructs around graph breaks run by generated code (spec/runtime.md)."""

import functools

import pytest
import torch

import refcomp
from refcomp.resume import all_entries
from tests.breaks import graph_break


def same(cf, f, *args, **kwargs):
    for _ in range(3):
        torch.testing.assert_close(cf(*args, **kwargs), f(*args, **kwargs))


def break_inside_try(x):
    y = x + 1
    try:
        n = int(y.sum())  # a break inside the try block
        if n > 100:
            raise ValueError("big")
        z = y * n
    except ValueError:
        z = y - 1
    finally:
        y = y * 0
    return z + y


def test_a_break_inside_try_runs_in_the_users_handlers():
    cf = refcomp.compile(break_inside_try, backend="eager")
    same(cf, break_inside_try, torch.ones(3))
    same(cf, break_inside_try, torch.full((3,), 50.0))  # the handler catches the raise
    report = refcomp.explain(break_inside_try, torch.ones(3), backend="eager")
    assert report.graph_count >= 2 and report.break_reasons[0]["id"] == "RB002"


def closure_after_break(x):
    scale = 2.0

    def mul(t):
        return t * scale

    graph_break("break")
    scale = 3.0
    return mul(x) + 1


def test_cells_cross_a_break(capsys):
    cf = refcomp.compile(closure_after_break, backend="eager")
    same(cf, closure_after_break, torch.ones(2))


def keyword_call(x, *, alpha=1.0):
    y = torch.add(x, x, alpha=alpha)
    graph_break("kw", alpha)
    return torch.add(y, x, alpha=alpha)


def test_keyword_calls_and_keyword_only_arguments(capsys):
    cf = refcomp.compile(keyword_call, backend="eager")
    same(cf, keyword_call, torch.ones(2), alpha=2.0)
    assert capsys.readouterr().out == "kw 2.0\n" * 6


def decorated(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        graph_break("wrapped")
        return fn(*args, **kwargs)
    return wrapper


@decorated
def model_forward(x, mask=None):
    y = x.relu()
    if mask is not None:
        y = y * mask
    return y.sum(-1)


def test_a_functools_wraps_wrapper_binds_its_own_parameters(capsys):
    cf = refcomp.compile(model_forward, backend="eager")
    x, m = torch.randn(2, 3), torch.ones(2, 3)
    same(cf, model_forward, x, mask=m)
    same(cf, model_forward, x)
    report = refcomp.explain(model_forward, x, mask=m, backend="eager")
    assert report.graph_count >= 1  # the inner function is compiled as its own frame


def loop_with_print(x):
    for i in range(5):
        x = x * 2
        graph_break("step", i)
    return x


def test_a_break_in_a_loop_reuses_one_resume_function(capsys):
    refcomp.reset()
    cf = refcomp.compile(loop_with_print, backend="eager")
    same(cf, loop_with_print, torch.ones(2))
    es = all_entries(cf.cache)
    assert len(es) <= 4 and max(e.hits for e in es) >= 10


def generates(x):
    yield x * 2


def test_a_generator_falls_back_with_a_reason():
    report = refcomp.explain(generates, torch.ones(2), backend="eager")
    assert [r["id"] for r in report.break_reasons] == ["RB014"]


def nested_calls(x):
    return torch.tanh(helper_prints(x * 2) + 1)


def helper_prints(t):
    graph_break("in helper")
    return t.exp()


def test_code_after_a_breaking_call_in_the_same_line_is_compiled(capsys):
    report = refcomp.explain(nested_calls, torch.ones(2), backend="eager")
    torch.testing.assert_close(report.result, nested_calls(torch.ones(2)))
    ops = [op for counts in report.ops_per_graph for op in counts]
    assert "tanh" in ops and "exp" in ops and "mul" in ops


def raises_after_break(x):
    graph_break("before")
    raise KeyError("user error")


def test_a_user_raise_after_a_break_is_the_users_exception(capsys):
    cf = refcomp.compile(raises_after_break, backend="eager")
    with pytest.raises(KeyError, match="user error"):
        cf(torch.ones(2))
