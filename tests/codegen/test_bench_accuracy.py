"""The benchmark checks the accuracy of its reduction rows against the float64 truth
(bench/harness.py, Note [Accuracy check])."""

import torch

from bench import harness
from bench.workloads import WORKLOADS, Workload


def test_an_inaccurate_candidate_is_wrong_and_eager_is_not():
    w = Workload("var_small", lambda x: x.var(dim=0),
                 lambda: (torch.randn(4096, 4, generator=torch.Generator().manual_seed(0)) + 3,),
                 accuracy=True)

    def sloppy(fn):  # accumulates in f16: far less accurate than eager
        return (lambda x: fn(x.half()).float()), (lambda: None)

    results = {r.candidate: r for r in harness.run_workload(
        w, {"eager": harness.eager_candidate, "sloppy": sloppy}, reps=1)}
    assert results["eager"].extra["wrong"] is False
    assert results["sloppy"].extra["wrong"] is True
    assert results["sloppy"].extra["rel_error"] > 1e-4


def test_reduction_rows_are_checked():
    rows = [n for n, w in WORKLOADS.items() if w.accuracy]
    assert {"reduce_dim0", "reduce_dim1", "reduce_dim2", "var_dims01", "sum_16m",
            "mean_rows"} <= set(rows)
