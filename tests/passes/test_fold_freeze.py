"""fold's limits and `freeze`: parameters as constants, conv/linear + batch_norm folding."""

from __future__ import annotations

import numpy as np
import pytest

from ir import GraphBuilder, parse, run
from ir.passes.fold import MAX_FOLD_NUMEL, fold, freeze
from ir.types import TensorType, f32


def _conv_bn_graph(with_bias: bool):
    b = GraphBuilder("net")
    x = b.input("x", TensorType(f32, (2, 3, 6, 6)))
    w = b.input("w", TensorType(f32, (4, 3, 3, 3)))
    stats = [b.input(n, TensorType(f32, (4,))) for n in ("mean", "var", "gamma", "beta")]
    y = b.conv2d(x, w, padding=[1, 1])
    if with_bias:
        y = b.add(y, b.reshape(b.input("bias", TensorType(f32, (4,))), shape=[1, 4, 1, 1]))
    return b.build([b.relu(b.batch_norm(y, *stats))])


def _linear_bn_graph():
    b = GraphBuilder("net")
    x = b.input("x", TensorType(f32, (5, 3)))
    w = b.input("w", TensorType(f32, (4, 3)))
    bias = b.input("bias", TensorType(f32, (4,)))
    stats = [b.input(n, TensorType(f32, (4,))) for n in ("mean", "var", "gamma", "beta")]
    y = b.add(b.matmul(x, b.permute(w, perm=[1, 0])), bias)
    return b.build([b.batch_norm(y, *stats)])


def _params(g, rng):
    params = {}
    for v in g.inputs[1:]:
        shape = tuple(int(d) for d in v.type.shape)
        low = 0.5 if v.name == "var" else -1.0
        params[v.name] = rng.uniform(low, 1.5, shape).astype(np.float32)
    return params


@pytest.mark.parametrize("make", [lambda: _conv_bn_graph(False), lambda: _conv_bn_graph(True),
                                  _linear_bn_graph], ids=["conv", "conv+bias", "linear"])
def test_freeze_folds_batch_norm_into_weights(make):
    rng = np.random.default_rng(0)
    g = make()
    params = _params(g, rng)
    frozen = freeze(g, params)
    counts = frozen.op_counts()
    assert "batch_norm" not in counts and counts["constant"] == 2, counts  # W' and b'
    assert [v.name for v in frozen.inputs] == ["x"]
    x = rng.normal(size=tuple(int(d) for d in g.inputs[0].type.shape)).astype(np.float32)
    (want,) = run(g, [x, *params.values()])
    (got,) = run(frozen, [x])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_batch_norm_stays_when_the_conv_has_another_use():
    b = GraphBuilder("net")
    x = b.input("x", TensorType(f32, (1, 2, 4, 4)))
    w = b.input("w", TensorType(f32, (2, 2, 1, 1)))
    stats = [b.input(n, TensorType(f32, (2,))) for n in ("mean", "var", "gamma", "beta")]
    y = b.conv2d(x, w)
    g = b.build([b.batch_norm(y, *stats), y])
    frozen = freeze(g, _params(g, np.random.default_rng(1)))
    assert frozen.op_counts()["batch_norm"] == 1


def test_freeze_rejects_unknown_and_mismatched_parameters():
    g = _linear_bn_graph()
    with pytest.raises(ValueError, match=r"no input %weight; inputs: %x, %w"):
        freeze(g, {"weight": np.zeros((4, 3), np.float32)})
    with pytest.raises(ValueError, match=r"%w is f32\[4,3\], got an array of shape \(3, 4\)"):
        freeze(g, {"w": np.zeros((3, 4), np.float32)})


def test_fold_leaves_an_op_that_fails_on_its_constants():
    g = parse("""func @f() -> f32[2] {
  %0 = constant {data=[1.0,2.0,3.0], dtype=f32} : f32[3]
  %1 = constant {data=[0,7], dtype=i64} : i64[2]
  %2 = gather %0, %1 {dim=0} : f32[2]
  return %2
}
""")
    assert [n.op.name for n in fold(g).nodes] == ["constant", "constant", "gather"]


def test_fold_size_limit_is_the_documented_one():
    n = MAX_FOLD_NUMEL
    text = f"""func @f() -> (i64[{n}], i64[{n + 1}]) {{
  %0 = arange {{end={n}}} : i64[{n}]
  %1 = neg %0 : i64[{n}]
  %2 = arange {{end={n + 1}}} : i64[{n + 1}]
  %3 = neg %2 : i64[{n + 1}]
  return %1, %3
}}
"""
    ops = [node.op.name for node in fold(parse(text)).nodes]
    assert ops == ["arange", "constant", "arange", "neg"]
