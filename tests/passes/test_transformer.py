"""The default pipeline on a transformer block: same results, fewer ops than decompose leaves."""

from __future__ import annotations

from ir.passes.manager import DEFAULT_PIPELINE, run_pipeline
from tests.passes.transformer import measure, transformer_block


def test_pipeline_preserves_the_transformer_block():
    g = transformer_block(batch=2, seq=4, dim=16, heads=2)
    out = run_pipeline(g, DEFAULT_PIPELINE, check_semantics=True)
    counts = out.op_counts()
    # Every composite is gone, the causal mask (arange >= arange) is one folded constant,
    # and the q/k/v projections read one shared reshape of the normalized input.
    assert not {"layer_norm", "softmax", "arange", "ge"} & set(counts)
    assert counts["constant"] == 1 and counts["matmul"] == 8


def test_measure_reports_fewer_ops_than_decompose_alone():
    m = measure(transformer_block(), repeats=1)
    assert m["input"] == 72 and m["optimized"] < m["decomposed"]
    assert set(m["seconds"]) == set(DEFAULT_PIPELINE)
