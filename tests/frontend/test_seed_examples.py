"""Seed 001: the article's models compile to the counts it prints and equal eager."""

import inspect

import pytest
import torch

import refcomp
from tests.frontend.seed_models import (
    BadIf,
    BadLoop,
    BadShapeBranch,
    GoodDynamic,
    GoodVectorized,
    GoodWhere,
    LogInsideForward,
    ReturnTensorForLog,
    Simple,
)

BACKENDS = ["eager", "interp"]

NO_BREAK = [(Simple, [(1, 4)]), (GoodWhere, [(4, 16)]), (ReturnTensorForLog, [(8, 16)]),
            (BadLoop, [(32, 16)]), (GoodVectorized, [(32, 16)]),
            (BadShapeBranch, [(8, 16), (8, 32)]), (GoodDynamic, [(8, 16)])]


def _flat(x):
    return list(x) if isinstance(x, tuple) else [x]


def _assert_same(got, want):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        assert g.requires_grad == w.requires_grad
        assert g.dtype == w.dtype


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls,shapes", NO_BREAK, ids=[c.__name__ for c, _ in NO_BREAK])
def test_no_break_examples_are_one_graph_and_equal_eager(cls, shapes, backend):
    torch.manual_seed(0)
    model = cls()
    for shape in shapes:
        x = torch.randn(*shape)
        torch.manual_seed(1)
        report = refcomp.explain(model, x, backend=backend)
        torch.manual_seed(1)
        want = model(x)
        assert report.graph_count == 1 and report.graph_break_count == 0, str(report)
        assert str(report).startswith("Graph Count: 1\nGraph Break Count: 0")
        _assert_same(report.result, want)


@pytest.mark.parametrize("cls,rid,marker,graphs", [(BadIf, "RB003", "if torch.rand(1)", 2),
                                                   (LogInsideForward, "RB002", ".item()", 1)])
def test_breaking_examples_split_with_their_reason(cls, rid, marker, graphs):
    torch.manual_seed(0)
    model = cls()
    x = torch.randn(8, 16)
    torch.manual_seed(2)
    report = refcomp.explain(model, x, backend="eager")
    torch.manual_seed(2)
    want = model(x)
    assert report.graph_count == graphs and report.graph_break_count == 1, str(report)
    assert [r["id"] for r in report.break_reasons] == [rid]
    lines, first = inspect.getsourcelines(cls.forward)
    line = first + next(i for i, text in enumerate(lines) if marker in text)
    assert report.break_reasons[0]["where"] == f"{inspect.getsourcefile(cls)}:{line}"
    _assert_same(report.result, want)


def test_compiled_module_reuses_its_graph_and_matches_eager_under_no_grad():
    refcomp.reset()
    torch.manual_seed(0)
    model = BadShapeBranch().eval()
    compiled = refcomp.compile(model, backend="interp")
    with torch.no_grad():
        for shape in [(8, 16), (8, 32), (8, 16), (8, 32)]:
            x = torch.randn(*shape)
            _assert_same(compiled(x), model(x))
    entries = compiled._compiled_forward.cache.entries
    assert len(entries) == 2 and [e.hits for e in entries] == [1, 1]
    assert all(e.backend == "interp" for e in entries)


@pytest.mark.parametrize("backend", BACKENDS)
def test_good_dynamic_is_one_graph_for_both_batch_sizes(backend):
    refcomp.reset()
    torch.manual_seed(0)
    model = GoodDynamic()
    compiled = refcomp.compile(model, backend=backend, dynamic=True)
    for n in (8, 16):
        x = torch.randn(n, 16)
        report = refcomp.explain(model, x, backend=backend, dynamic=True)
        assert (report.graph_count, report.graph_break_count) == (1, 0)
        _assert_same(compiled(x), model(x))
    (entry,) = compiled._compiled_forward.cache.entries
    assert entry.hits == 1
    assert "s0" in str(entry.graph.inputs[0].type)


def test_log_inside_forward_under_dynamic_breaks_once_as_in_the_article():
    # Regression: with dynamic=True the linear's contraction dim was pinned static for the
    # whole-frame trace, but the trace that splits at `.item()` forgot the pin, broke at
    # the linear too (RB013) and reported 2 breaks where the article and Dynamo report 1.
    torch.manual_seed(0)
    model = LogInsideForward()
    for n in (8, 12):
        x = torch.randn(n, 16)
        refcomp.reset()
        report = refcomp.explain(model, x, backend="interp", dynamic=True)
        assert (report.graph_count, report.graph_break_count) == (1, 1), str(report)
        assert [r["id"] for r in report.break_reasons] == ["RB002"]
        _assert_same(report.result, model(x))
