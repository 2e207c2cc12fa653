"""Hypothesis strategies shared by every suite: random well-typed graphs and their inputs.

`graphs()` draws `(graph, args)`: a verified `ir.Graph` built op by op from a menu of
moves over a pool of live values, and numpy arrays for its inputs.  Passes and
backends are tested on these (`run(g) == run(pass(g))`, backend == interpreter).

The menus are walks of the op registry, filtered by the facts each move needs
(Note [Menus from the registry]), so a new op reaches every property that uses these
graphs without editing a list.  Values stay finite and small so that float
comparisons are meaningful: an op whose reference gives a non-finite result (or
raises) on ordinary finite inputs sees a shifted positive operand where that makes
it finite (log, sqrt, the divisor of div, the base of pow), and is not drawn otherwise.

Note [Menus from the registry]
A move draws from the ops whose facts fit it: category, operand count, no required
attribute, a scalar form (pointwise: what backends lower), a type rule that keeps the
operand dtype (so the pool stays one dtype family), and a probe of the op's
reference (`ref`) on a grid of finite values.  The probe is what "defined on
ordinary inputs" means; it cannot see undefined behaviour that numpy defines,
so `NOT_DRAWN` names the ops excluded for that, each with its reason.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
from hypothesis import strategies as st

from ir.builder import GraphBuilder
from ir.ops.registry import POINTWISE, REDUCTION, all_ops
from ir.types import TensorType, bool_, f32, f64, i32, i64, result_type

NOT_DRAWN = {
    # numpy shifts by a negative or too-large amount; torch and LLVM leave it undefined.
    "bitwise_left_shift": "undefined for shift amounts outside [0, bits)",
    "bitwise_right_shift": "undefined for shift amounts outside [0, bits)",
}
_GRID = {True: (-3.0, -1.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5), False: (-3, -1, 0, 1, 2)}
_POSITIVE = {True: (0.5, 1.0, 2.5), False: (1, 2, 3)}


def _infers(op, dtype):
    """op's result type for `dtype` operands of shape [2] and default attributes, or None."""
    types = [TensorType(dtype, (2,))] * len(op.operands)
    try:
        out = op.infer(types, **{a: s.default for a, s in op.attrs.items()})
    except (TypeError, ValueError):
        return None
    return out if isinstance(out, TensorType) else None


def _keeps_dtype(op, dtype) -> bool:
    out = _infers(op, dtype)
    return out is not None and out.dtype == dtype


def _finite_on(op, columns, dtype) -> bool:
    """True if op's reference gives finite results for every combination of values."""
    rows = list(itertools.product(*columns))
    arrays = [np.array(col, dtype=dtype.np) for col in zip(*rows)]
    try:
        with np.errstate(all="raise"):
            out = op.ref(*arrays, **{a: s.default for a, s in op.attrs.items()})
    except (FloatingPointError, ValueError, ZeroDivisionError, TypeError):
        return False
    return bool(np.all(np.isfinite(np.asarray(out, dtype=np.float64))))


@functools.lru_cache(maxsize=None)
def _pointwise_menu(dtype, arity: int, differentiable: bool) -> dict[str, tuple[int, ...]]:
    """name -> the operand positions to make positive ((): none) for drawable ops."""
    menu = {}
    for op in all_ops():
        if op.category != POINTWISE or len(op.operands) != arity or op.variadic or \
                op.scalar is None or op.name in NOT_DRAWN or \
                (differentiable and op.vjp is None) or \
                any(s.required for s in op.attrs.values()) or not _keeps_dtype(op, dtype):
            continue
        grid, positive = _GRID[dtype.is_float], _POSITIVE[dtype.is_float]
        for shifted in [()] + [(k,) for k in range(arity)]:
            columns = [positive if k in shifted else grid for k in range(arity)]
            if _finite_on(op, columns, dtype):
                menu[op.name] = shifted
                break
    return menu


def unary_ops(dtype, positive: bool = False, differentiable: bool = False) -> tuple[str, ...]:
    """One-operand pointwise ops for `dtype` operands (positive: those needing x > 0;
    differentiable: those with a VJP)."""
    menu = _pointwise_menu(dtype, 1, differentiable)
    return tuple(n for n, shifted in menu.items() if bool(shifted) == positive)


def binary_ops(dtype, differentiable: bool = False) -> tuple[str, ...]:
    """Two-operand pointwise ops that keep `dtype` (see `positive_operands`)."""
    return tuple(_pointwise_menu(dtype, 2, differentiable))


def positive_operands(name: str, dtype) -> tuple[int, ...]:
    """The operand positions of a drawn pointwise op that must be positive."""
    return _pointwise_menu(dtype, 2 if name in binary_ops(dtype) else 1, False)[name]


def comparisons(dtype) -> tuple[str, ...]:
    """Two-operand pointwise ops from `dtype` operands to bool (for `where` conditions)."""
    out = []
    for op in all_ops():
        if op.category == POINTWISE and len(op.operands) == 2 and not op.variadic and \
                op.name not in NOT_DRAWN and not any(s.required for s in op.attrs.values()):
            try:
                t = op.infer([TensorType(dtype, (2,))] * 2)
            except (TypeError, ValueError):
                continue
            if t.dtype == bool_ and dtype != bool_:
                out.append(op.name)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _reduction_menu(dtype, differentiable: bool) -> dict[str, bool]:
    """name -> whether it is defined on empty input, for `dims`/`keepdim` reductions."""
    menu = {}
    for op in all_ops():
        if op.category != REDUCTION or set(op.attrs) != {"dims", "keepdim"} or \
                op.name in NOT_DRAWN or not _infers(op, dtype) or \
                (differentiable and op.vjp is None):
            continue
        one = np.ones((1,), dtype.np)
        try:
            with np.errstate(all="raise"):
                finite = bool(np.all(np.isfinite(np.asarray(op.ref(one, dims=(), keepdim=False),
                                                            np.float64))))
        except (FloatingPointError, ValueError, ZeroDivisionError):
            finite = False
        if not finite:
            continue
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numpy's mean of nothing
                op.ref(np.ones((0,), dtype.np), dims=(), keepdim=False)
            menu[op.name] = True
        except ValueError:
            menu[op.name] = False
    return menu


def reductions(dtype, allow_empty: bool = False,
               differentiable: bool = False) -> tuple[str, ...]:
    """Reductions over `dims` with `keepdim` of `dtype` operands (allow_empty: defined on [])."""
    return tuple(n for n, empty_ok in _reduction_menu(dtype, differentiable).items()
                 if empty_ok or not allow_empty)


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
def graphs(draw, max_nodes: int = 8, dtypes=(f32, f32, f64, i64, i32), allow_zero_size=True,
           differentiable=False):
    """A random verified graph and arguments for it (differentiable: only ops with a VJP)."""
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
        value = _apply(draw, b, move, x, pool, differentiable)
        if value is not None:
            pool.append(value)
    n_out = draw(st.integers(1, min(3, len(pool))))
    outputs = [pool[-1]] + draw(st.lists(st.sampled_from(pool), max_size=n_out - 1))
    graph = b.build(outputs)
    args = [draw(arrays_for(v.type)) for v in graph.inputs]
    return graph, args


def _apply(draw, b, move, x, pool, differentiable):
    t = x.type
    if t.dtype.is_bool:
        return b.cast(x, dtype=f32)
    if move == "unary":
        name = draw(st.sampled_from(unary_ops(t.dtype, False, differentiable) +
                                    unary_ops(t.dtype, True, differentiable)))
        return b.op(name, *_operands(b, name, t.dtype, [x]))
    if move in ("binary", "scalar"):
        same = [v for v in pool if v.type.shape == t.shape or v.type.rank == 0]
        other = draw(st.sampled_from(same)) if move == "binary" else \
            b.scalar(draw(st.sampled_from((1.0, 2, -0.5))), like=t)
        common = result_type(t.dtype, other.type.dtype)  # the dtype the op computes in
        name = draw(st.sampled_from(binary_ops(common, differentiable)))
        return b.op(name, *_operands(b, name, common, [x, other]))
    if move == "reduce" and t.rank > 0:
        dims = draw(st.lists(st.integers(0, t.rank - 1), max_size=t.rank, unique=True))
        empty = _has_empty_reduction(t.shape, dims)
        name = draw(st.sampled_from(reductions(t.dtype, empty, differentiable)))
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
        return b.where(b.op(draw(st.sampled_from(comparisons(t.dtype))), x, other), x, other)
    if move == "cast":
        return b.cast(x, dtype=draw(st.sampled_from((f32, f64, i64))))
    return None


def _operands(b, name, dtype, values):
    """`values`, with the positions the op needs positive made |v| + 0.5 (ints: |v| + 1)."""
    shift = 0.5 if dtype.is_float else 1
    out = []
    for k, v in enumerate(values):
        if k in positive_operands(name, dtype):
            v = b.add(b.abs(v if v.type.dtype == dtype else b.cast(v, dtype=dtype)), shift)
        out.append(v)
    return out


def _has_empty_reduction(shape, dims):
    axes = dims or range(len(shape))
    return any(shape[d] == 0 for d in axes) or (0 in shape)
