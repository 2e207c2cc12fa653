"""explain(): counts, reasons, ops, guards for every seed 001 model, and equal eager."""

import inspect

import pytest
import torch

import refcomp
from tests.breaks import graph_break
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

# (model, input shape, graph count, break count) as the seed article prints them, except
# that BadIf is a break here (the jump on the tensor) where torch's explain says 0.
SEED = [(Simple, (1, 4), 1, 0), (BadIf, (4, 16), 2, 1), (GoodWhere, (4, 16), 1, 0),
        (LogInsideForward, (8, 16), 1, 1), (ReturnTensorForLog, (8, 16), 1, 0),
        (BadLoop, (32, 16), 1, 0), (GoodVectorized, (32, 16), 1, 0),
        (BadShapeBranch, (8, 16), 1, 0), (BadShapeBranch, (8, 32), 1, 0),
        (GoodDynamic, (8, 16), 1, 0)]


def _flat(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.parametrize("backend", ["eager", "interp"])
@pytest.mark.parametrize("cls,shape,graphs,breaks", SEED,
                         ids=[f"{c.__name__}{s[1]}" for c, s, _, _ in SEED])
def test_seed_counts_and_results(cls, shape, graphs, breaks, backend):
    torch.manual_seed(0)
    model = cls()
    x = torch.randn(*shape)
    for seed in (1, 2, 3):  # BadIf: several draws, so both branches are likely taken
        torch.manual_seed(seed)
        report = refcomp.explain(model)(x) if seed == 1 else refcomp.explain(model, x)
        torch.manual_seed(seed)
        want = model(x)
        assert (report.graph_count, report.graph_break_count) == (graphs, breaks), str(report)
        assert str(report).startswith(f"Graph Count: {graphs}\nGraph Break Count: {breaks}")
        for got, exp in zip(_flat(report.result), _flat(want), strict=True):
            torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-5)


def test_report_fields_name_the_break():
    torch.manual_seed(0)
    model = LogInsideForward()
    report = refcomp.explain(model, torch.randn(8, 16), backend="eager")
    (reason,) = report.break_reasons
    lines, first = inspect.getsourcelines(LogInsideForward.forward)
    line = first + next(i for i, text in enumerate(lines) if ".item()" in text)
    assert reason["id"] == "RB002"
    assert reason["where"] == f"{inspect.getsourcefile(LogInsideForward)}:{line}"
    assert reason["instruction"].startswith("CALL")
    assert reason["hint"] == refcomp.REASONS["RB002"].hint
    assert report.ops_per_graph[0]["mean"] == 1
    assert any("L['x']" in g for g in report.guards)
    assert report.compile_time_s > 0
    text = str(report)
    assert "Break Reason 1: [RB002]" in text and f"{line} (CALL" in text


def test_fullgraph_error_carries_the_same_reason_id_and_text():
    torch.manual_seed(0)
    model = LogInsideForward()
    x = torch.randn(8, 16)
    report = refcomp.explain(model, x, backend="eager")
    with pytest.raises(refcomp.CaptureError) as info:
        refcomp.compile(model, backend="eager", fullgraph=True)(x)
    assert info.value.rid == report.break_reasons[0]["id"]
    assert report.break_reasons[0]["reason"] in str(info.value)
    assert report.break_reasons[0]["where"] in str(info.value)


def test_explain_draws_its_graphs_and_breaks(tmp_path):
    """explain(...).to_dot()/render(): one cluster per graph, the break between them, and
    (fused) the regions the backends get (ir/viz.py, spec/ir.md "Pictures")."""
    def f(x):
        y = (x.sin() * 2).relu()
        graph_break("break")
        return y.exp() + 1

    report = refcomp.explain(f, torch.randn(4, 4))
    assert report.graph_count == 2 and len(report.ir_graphs) == 2
    dot = report.to_dot()
    assert dot.count("subgraph cluster_graph") == 2
    assert "graph break\\n[RB016]" in dot
    assert "fused pointwise (one kernel)" in dot
    plain = report.to_dot(fused=False)
    assert "fused" not in plain and "= sin" in plain
    out = report.render(tmp_path / "f.svg")
    assert out.exists() and out.suffix in (".svg", ".dot")
