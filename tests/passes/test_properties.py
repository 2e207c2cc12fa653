"""Hypothesis: every pass and the default pipeline preserve interpreter results on random graphs.

Random graphs come from the shared strategy (tests/strategies.py), plus a strategy of
graphs built around composite ops so that `decompose` has something to do, plus
`freeze` of random inputs so that `fold` sees whole constant subgraphs.  Results are
compared with the manager's dtype-aware tolerances (exact for integers and bools).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ir.builder import GraphBuilder
from ir.passes.fold import freeze
from ir.passes.manager import DEFAULT_PIPELINE, check_same_results, run_pipeline
from ir.printer import print_graph
from ir.types import TensorType, bf16, f16, f32, f64
from ir.verify import verify
from tests.strategies import arrays_for, graphs, shapes

PASSES = ("decompose", "fold", "simplify", "scatters", "cse", "dce")


@st.composite
def composite_graphs(draw):
    """A graph around one composite op (or var), with a pointwise op before and after."""
    dtype = draw(st.sampled_from((f32, f32, f64, f16, bf16)))
    shape = draw(shapes(max_rank=3, max_side=4, min_side=1).filter(lambda s: len(s) >= 2))
    b = GraphBuilder("composite")
    x = b.input("x", TensorType(dtype, shape))
    h = b.op(draw(st.sampled_from(("neg", "tanh", "abs"))), x)
    kind = draw(st.sampled_from(("softmax", "log_softmax", "layer_norm", "rms_norm",
                                 "batch_norm", "var")))
    n = draw(st.integers(1, len(shape)))
    if kind in ("softmax", "log_softmax"):
        y = b.op(kind, h, dim=draw(st.integers(-len(shape), len(shape) - 1)))
    elif kind == "layer_norm":
        w = b.input("w", TensorType(dtype, shape[-n:]))
        y = b.layer_norm(h, w, b.input("b", TensorType(dtype, shape[-n:])), normalized_ndim=n)
    elif kind == "rms_norm":
        y = b.rms_norm(h, b.input("w", TensorType(dtype, shape[-n:])), normalized_ndim=n)
    elif kind == "batch_norm":
        stats = [b.input(name, TensorType(dtype, (shape[1],)))
                 for name in ("mean", "var", "w", "b")]
        y = b.batch_norm(h, stats[0], b.add(b.abs(stats[1]), 0.5), stats[2], stats[3])
    else:
        dims = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
        y = b.var(h, dims=dims, keepdim=draw(st.booleans()),
                  correction=draw(st.integers(0, 1)))
    g = b.build([b.mul(y, 1.0)])
    return g, [draw(arrays_for(v.type)) for v in g.inputs]


def _assert_preserved(g, args, passes):
    out = run_pipeline(g, passes)  # verifies after every pass
    assert verify(out) == []
    problem = check_same_results(g, out, args)
    assert problem == "", f"{passes}: {problem}\n{print_graph(g)}\n->\n{print_graph(out)}"
    return out


@pytest.mark.parametrize("name", PASSES)
@given(case=graphs())
def test_pass_preserves_results(name, case):
    g, args = case
    _assert_preserved(g, args, [name])


@given(case=graphs())
def test_default_pipeline_preserves_results(case):
    g, args = case
    _assert_preserved(g, args, DEFAULT_PIPELINE)


@settings(max_examples=40)
@given(case=composite_graphs())
def test_decompose_and_pipeline_on_composites(case):
    g, args = case
    out = _assert_preserved(g, args, DEFAULT_PIPELINE)
    composite = {"softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "var"}
    assert not composite & set(out.op_counts()), print_graph(out)


@pytest.mark.parametrize("name", PASSES)
@given(case=st.one_of(graphs(), composite_graphs()))
def test_pass_is_idempotent(name, case):
    g, _ = case
    once = run_pipeline(g, [name])
    assert print_graph(run_pipeline(once, [name])) == print_graph(once)


@settings(max_examples=20)
@given(case=graphs(), data=st.data())
def test_freeze_then_pipeline_preserves_results(case, data):
    g, args = case
    frozen_count = data.draw(st.integers(1, len(g.inputs)))
    params = {v.name: a for v, a in zip(g.inputs[:frozen_count], args)}
    frozen = freeze(g, params)
    assert verify(frozen) == []
    assert [v.name for v in frozen.inputs] == [v.name for v in g.inputs[frozen_count:]]
    out = run_pipeline(frozen, DEFAULT_PIPELINE)
    want = run_pipeline(g, [])  # the same graph, verified
    from ir.interpreter import run

    expected = run(want, args)
    actual = run(out, args[frozen_count:])
    for e, a, v in zip(expected, actual, g.outputs):
        from ir.passes.manager import tolerance

        rtol, atol = tolerance(v.type.dtype)
        assert e.dtype == a.dtype and e.shape == a.shape
        assert np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
