"""Hypothesis strategies shared by every suite: random well-typed graphs and their inputs.

`graphs()` draws `(graph, args)`: a verified `ir.Graph` built op by op from a menu of
moves over a pool of live values, and numpy arrays for its inputs.  Passes and
backends are tested on these (`run(g) == run(pass(g))`, backend == interpreter).
Values stay finite and small so that float comparisons are meaningful; ops that
can produce NaN from ordinary inputs (log, sqrt, pow) see shifted positive operands.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ir.builder import GraphBuilder
from ir.types import TensorType, f32, f64, i32, i64

UNARY_FLOAT = ("neg", "abs", "exp", "tanh", "sigmoid", "sin", "cos", "relu", "silu", "erf",
               "floor", "ceil", "gelu", "expm1")
UNARY_POSITIVE = ("log", "sqrt", "rsqrt", "log1p", "reciprocal")
UNARY_INT = ("neg", "abs", "relu", "sign")
BINARY = ("add", "sub", "mul", "maximum", "minimum")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE = ("sum", "amax", "amin", "mean", "prod")


def shapes(max_rank: int = 3, max_side: int = 4, min_side: int = 0):
    return st.lists(st.integers(min_side, max_side), min_size=0, max_size=max_rank).map(tuple)


@st.composite
def arrays_for(draw, t: TensorType):
    shape = tuple(int(d) for d in t.shape)
    n = int(np.prod(shape)) if shape else 1
    if t.dtype.is_float:
        vals = draw(st.lists(st.floats(-3, 3, width=32), min_size=n, max_size=n))
    else:
        vals = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return np.array(vals, dtype=t.dtype.np).reshape(shape)


@st.composite
def graphs(draw, max_nodes: int = 8, dtypes=(f32, f32, f64, i64, i32), allow_zero_size=True):
    """A random verified graph and arguments for it."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(min_side=0 if allow_zero_size else 1))
    b = GraphBuilder("random")
    pool = []
    for i in range(draw(st.integers(1, 3))):
        pool.append(b.input(f"x{i}", TensorType(dtype, shape)))
    for _ in range(draw(st.integers(1, max_nodes))):
        x = draw(st.sampled_from(pool))
        move = draw(st.sampled_from(("unary", "binary", "binary", "scalar", "reduce",
                                     "layout", "where", "cast")))
        value = _apply(draw, b, move, x, pool)
        if value is not None:
            pool.append(value)
    n_out = draw(st.integers(1, min(3, len(pool))))
    outputs = [pool[-1]] + draw(st.lists(st.sampled_from(pool), max_size=n_out - 1))
    graph = b.build(outputs)
    args = [draw(arrays_for(v.type)) for v in graph.inputs]
    return graph, args


def _apply(draw, b, move, x, pool):
    t = x.type
    if t.dtype.is_bool:
        return b.cast(x, dtype=f32)
    if move == "unary":
        if t.dtype.is_float:
            name = draw(st.sampled_from(UNARY_FLOAT + UNARY_POSITIVE))
            if name in UNARY_POSITIVE:
                x = b.add(b.abs(x), 0.5)
            return b.op(name, x)
        return b.op(draw(st.sampled_from(UNARY_INT)), x)
    if move in ("binary", "scalar"):
        same = [v for v in pool if v.type.shape == t.shape or v.type.rank == 0]
        other = draw(st.sampled_from(same)) if move == "binary" else \
            draw(st.sampled_from((1.0, 2, -0.5)))
        return b.op(draw(st.sampled_from(BINARY)), x, other)
    if move == "reduce" and t.rank > 0:
        name = draw(st.sampled_from(REDUCE))
        if name == "mean" and not t.dtype.is_float:
            name = "sum"
        dims = draw(st.lists(st.integers(0, t.rank - 1), max_size=t.rank, unique=True))
        if name in ("amax", "amin") and _has_empty_reduction(t.shape, dims):
            name = "sum"
        return b.op(name, x, dims=dims, keepdim=draw(st.booleans()))
    if move == "layout" and t.rank > 0:
        kind = draw(st.sampled_from(("permute", "reshape", "slice", "unsqueeze")))
        if kind == "permute":
            return b.permute(x, perm=draw(st.permutations(range(t.rank))))
        if kind == "reshape":
            return b.reshape(x, shape=[int(np.prod(t.shape))])
        if kind == "slice":
            d = draw(st.integers(0, t.rank - 1))
            return b.slice(x, dim=d, start=draw(st.integers(0, 2)), stop=draw(st.integers(0, 5)),
                           step=draw(st.integers(1, 2)))
        return b.unsqueeze(x, dim=draw(st.integers(0, t.rank)))
    if move == "where":
        other = draw(st.sampled_from([v for v in pool if v.type.shape == t.shape]))
        return b.where(b.op(draw(st.sampled_from(COMPARE)), x, other), x, other)
    if move == "cast":
        return b.cast(x, dtype=draw(st.sampled_from((f32, f64, i64))))
    return None


def _has_empty_reduction(shape, dims):
    axes = dims or range(len(shape))
    return any(shape[d] == 0 for d in axes) or (0 in shape)
