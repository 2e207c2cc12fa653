"""simplify is exact: on chains of near-identities over NaN, infinities and signed zeros,
the simplified graph gives bit-identical results (the claim of Note [Exact rules]).

The shared strategy rarely builds `x * 1` or `x + -0.0`; this one builds nothing else,
mixing operand dtypes so that rules must insert casts, and feeds values that break
inexact rules (-0.0 + 0.0 is +0.0, NaN * 0 is NaN, inf - inf is NaN).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ir.builder import GraphBuilder
from ir.interpreter import run
from ir.passes.manager import run_pipeline
from ir.printer import print_graph
from ir.types import TensorType, bool_, f32, f64, i32, i64

SPECIAL = (math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, -2.0, 3.0)


def _scalar(b, draw, like):
    value = draw(st.sampled_from((1, 0, 1.0, 0.0, -0.0, 2.0, True, False)))
    dtype = draw(st.sampled_from((like.type.dtype, f32, i64, bool_)))
    if isinstance(value, float) and not dtype.is_float:
        value = int(value)
    if dtype.is_bool:
        value = bool(value)
    return b.scalar(value, dtype=dtype)


@st.composite
def identity_chains(draw):
    dtype = draw(st.sampled_from((f32, f64, i64, i32, bool_)))
    shape = draw(st.sampled_from(((4,), (2, 3), (1, 3, 2))))
    b = GraphBuilder("chain")
    x = b.input("x", TensorType(dtype, shape))
    for _ in range(draw(st.integers(1, 6))):
        t = x.type
        move = draw(st.sampled_from(("mul", "add", "sub", "div", "pow", "neg2", "not2", "cast",
                                     "reshape2", "permute2", "where", "expand", "slice")))
        if move in ("mul", "add"):
            s = _scalar(b, draw, x)
            x = b.op(move, *((x, s) if draw(st.booleans()) else (s, x)))
        elif move in ("sub", "div", "pow") and not t.dtype.is_bool:
            x = b.op(move, x, _scalar(b, draw, x))
        elif move == "neg2" and not t.dtype.is_bool:
            x = b.neg(b.neg(x))
        elif move == "not2":
            x = b.logical_not(b.logical_not(x))
        elif move == "cast":
            x = b.cast(x, dtype=draw(st.sampled_from((t.dtype, f64))))
        elif move == "reshape2":
            x = b.reshape(b.reshape(x, shape=[int(t.numel())]), shape=list(t.shape))
        elif move == "permute2" and t.rank > 1:
            p = draw(st.permutations(range(t.rank)))
            x = b.permute(b.permute(x, perm=p), perm=[p.index(i) for i in range(t.rank)])
        elif move == "where":
            cond = b.scalar(draw(st.booleans()), dtype=bool_)
            other = b.neg(x) if not t.dtype.is_bool else b.logical_not(x)
            x = b.where(cond, x, other) if draw(st.booleans()) else b.where(cond, other, x)
        elif move == "expand":
            x = b.expand(x, shape=list(t.shape))
        elif move == "slice":
            x = b.slice(x, dim=0, start=0, stop=int(t.shape[0]) + draw(st.integers(0, 2)))
    g = b.build([x])
    n = int(np.prod(shape))
    if dtype.is_float:
        values = draw(st.lists(st.sampled_from(SPECIAL), min_size=n, max_size=n))
    elif dtype.is_bool:
        values = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    else:
        values = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    return g, [np.array(values, dtype=dtype.np).reshape(shape)]


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a),
                                                                        np.signbit(b))
    return np.array_equal(a, b)


@settings(max_examples=200)
@given(case=identity_chains())
def test_simplify_is_bit_exact(case):
    g, args = case
    out = run_pipeline(g, ["simplify", "dce"])
    (want,), (got,) = run(g, args), run(out, args)
    assert _bits_equal(want, got), f"{want} vs {got}\n{print_graph(g)}\n->\n{print_graph(out)}"


@settings(max_examples=100)
@given(case=identity_chains())
def test_fold_and_pipeline_are_bit_exact_on_identity_chains(case):
    g, args = case
    out = run_pipeline(g, ["fold", "simplify", "cse", "dce"])
    (want,), (got,) = run(g, args), run(out, args)
    assert _bits_equal(want, got), f"{want} vs {got}\n{print_graph(g)}\n->\n{print_graph(out)}"
