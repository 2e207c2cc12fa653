"""Constant folding with the reference interpreter, and `freeze` (parameters as constants).

Owns: the `fold` pass, `freeze` and `fold_batch_norm`.  What counts as a constant
(`Const`, `constant_of`, `splat_value`) is in ir/facts.py, shared with simplify.
Folding evaluates an op with its own reference semantics (`OpDef.ref`), so it can
never disagree with the interpreter.
Spec: spec/passes.md, "fold".
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ir.facts import Const, as_const, constant_arrays, constant_of, has_effects, scalar_of
from ir.graph import Graph, Node, Value
from ir.interpreter import run
from ir.ops.registry import CREATION, FUSED, POINTWISE, RANDOM, lookup
from ir.passes.dce import dce
from ir.passes.registry import register_pass
from ir.rewrite import RuleTable, rewrite
from ir.types import round_to_dtype

# A folded result with more elements than this stays computed, unless it is a splat
# (every element equal), which is a `full` of any size: no data is materialized.
MAX_FOLD_NUMEL = 4096


@register_pass("fold")
def fold(g: Graph) -> Graph:
    """Evaluate nodes whose operands are all constants.

    Constants are `full`, `constant`, static `arange`, and results folded earlier in
    the same run.  A folded node becomes `full` if its result is a splat (all elements
    equal, or empty; any size, symbolic shapes included: so reshape/expand/permute of
    a scalar and pointwise ops on splats fold without materializing anything), else
    `constant` if it has at most MAX_FOLD_NUMEL elements, else it stays.  An `expand`
    of a non-splat constant stays an expand (a literal would only repeat data), but its
    value is known, so the ops reading it fold.  A `constant` whose elements are all
    equal becomes a `full`.
    Never folds: random ops, nodes with effects, fused nodes, complex results, extern ops
    on operands over MAX_EVAL_NUMEL elements.  Does not remove the now-unused producers (dce does).
    Requires: a verified graph.  Preserves: every value's type, inputs, outputs order.
    Idempotent.  Bodies of fused nodes are left alone.
    """
    return fold_constants(g, MAX_FOLD_NUMEL)


def fold_constants(g: Graph, max_numel: int) -> Graph:
    """`fold` with a chosen size limit for materialized results (freeze raises it).

    `known` maps each value whose contents are known to them.  A folded node is
    replaced by a creation node defining the *same* Value (same type, same name hint),
    so no use needs rewriting.
    """
    known: dict[Value, Const] = {}
    nodes: list[Node] = []
    for node in g.nodes:
        source = constant_of(node)
        if source is not None:
            if node.op.name == "constant" and source.splat is not None:
                node = _materialize(source, node.output)
            known[node.output] = source
        elif _foldable(node) and all(v in known for v in node.inputs):
            result = _evaluate(node, [known[v] for v in node.inputs], max_numel)
            if result is not None:
                known[node.output] = result
                if result.splat is not None or node.op.name != "expand":
                    node = _materialize(result, node.output)
        nodes.append(node)
    return g.with_nodes(nodes)


def _foldable(node: Node) -> bool:
    op = node.op
    return (op.category not in (CREATION, RANDOM, FUSED) and not has_effects(node)
            and len(node.outputs) == 1
            and not node.outputs[0].type.dtype.is_complex)  # `full` holds real values


def _evaluate(node: Node, operands: list[Const], max_numel: int) -> Optional[Const]:
    """The node's result from constant operands, or None if it should not be folded."""
    out = node.output
    if all(c.array is None for c in operands):
        if node.op.index_map:  # an index map of a splat is a splat
            return Const(splat=operands[0].splat)
        if node.op.category == POINTWISE:
            # A pointwise op on splats is a splat: evaluate it once, on rank-0 arrays.
            scalars = [np.asarray(c.splat, v.type.dtype.np) for c, v in zip(operands, node.inputs)]
            try:
                with np.errstate(all="ignore"):
                    result = node.op.ref(*scalars, **node.attrs)
            except Exception:
                return None  # see below: leave a failing op to fail at run time
            return Const(splat=scalar_of(round_to_dtype(np.asarray(result), out.type.dtype), out))
    if not out.type.is_static:
        return None
    arrays = [c.materialize(v) for c, v in zip(operands, node.inputs)]
    if any(a is None for a in arrays):
        return None
    try:
        (result,) = run(Graph("fold", list(node.inputs), [node], [out]), arrays)
    except Exception:
        # An op that fails on these constants fails at run time too: leave it there.
        return None
    const = as_const(result)
    if const.splat is None and result.size > max_numel:
        return None
    return const


def _materialize(const: Const, value: Value) -> Node:
    """A creation node that defines `value` as `const`: `full` for splats, else `constant`."""
    t = value.type
    if const.array is None:
        attrs = {"value": const.splat, "shape": t.shape, "dtype": t.dtype, "device": t.device}
        return Node(lookup("full"), [], lookup("full").normalize_attrs(attrs), [value])
    attrs = {"data": const.array.tolist(), "dtype": t.dtype, "device": t.device}
    return Node(lookup("constant"), [], lookup("constant").normalize_attrs(attrs), [value])


# --- freeze -----------------------------------------------------------------------------
def freeze(graph: Graph, params: Mapping[str, np.ndarray]) -> Graph:
    """Turn the inputs named in `params` into constants, fold batch norms, fold, dce.

    Use on a graph whose parameters will not change (inference).  Run it before
    `decompose`: batch-norm folding looks for the `batch_norm` composite after a
    conv2d or a rank-2 matmul (linear), optionally through a per-channel bias add,
    and folds the normalization into the weight and a bias:
        W' = W * gamma / sqrt(var + eps)     (per output channel)
        b' = (b - mean) * gamma / sqrt(var + eps) + beta
    Folded results may be as large as the largest parameter.  Errors name an unknown
    input or a parameter whose shape or dtype does not match its input's type.
    """
    by_name = {v.name: v for v in graph.inputs}
    for name, array in params.items():
        if name not in by_name:
            valid = ", ".join(f"%{v.name}" for v in graph.inputs)
            raise ValueError(f"freeze: @{graph.name} has no input %{name}; inputs: {valid}")
        t = by_name[name].type
        if not t.is_static or tuple(np.shape(array)) != tuple(int(d) for d in t.shape):
            raise ValueError(f"freeze: %{name} is {t}, got an array of shape {np.shape(array)}")
    constants, limit = [], MAX_FOLD_NUMEL
    for name, array in params.items():
        value = by_name[name]
        data = round_to_dtype(np.asarray(array).astype(value.type.dtype.np), value.type.dtype)
        constants.append(_materialize(Const(array=data), value))
        limit = max(limit, data.size)
    frozen = Graph(graph.name, [v for v in graph.inputs if v.name not in params],
                   constants + graph.nodes, graph.outputs)
    frozen = fold_constants(frozen, limit)
    frozen = fold_batch_norm(frozen)
    return dce(fold_constants(frozen, limit))


def fold_batch_norm(g: Graph) -> Graph:
    """Fold `batch_norm(conv2d(x, W) [+ b])` and `batch_norm(matmul(x, W) [+ b])` (rank 2).

    Requires W, b and the statistics to be constants and the conv/matmul (and add) to
    have no other use; otherwise the batch norm stays.  The result is
    `add(conv2d(x, W'), expand(reshape(b')))` with W', b' computed in float64.
    A one-rule table on the rewrite engine; its context is the input's constants,
    producers and uses (an output counts as a use the rewrite cannot see).
    """
    uses = g.uses()
    for v in g.outputs:
        uses.setdefault(v, []).append(None)
    return rewrite(g, BATCH_NORM, context=(constant_arrays(g), g.producers(), uses))


BATCH_NORM = RuleTable("fold_batch_norm")


@BATCH_NORM.rule("batch_norm")
def into_weights(node, rw):
    """batch_norm(ext(x, W) [+ b]) -> ext(x, W') + b'   W' = W*gamma/sqrt(var+eps) per channel"""
    match = _match_batch_norm(node, *rw.context)
    if match is None:
        return None
    x, weight, bias, extern = match
    b = rw.builder
    new_w = b.insert(lookup("constant"), [], {"data": weight.tolist(),
                                             "dtype": extern.inputs[1].type.dtype})
    y = b.insert(extern.op, [x, new_w], extern.attrs)
    shape = [1, bias.shape[0]] + [1] * (y.type.rank - 2)
    bias = round_to_dtype(bias.reshape(shape).astype(y.type.dtype.np), y.type.dtype)
    new_b = b.insert(lookup("constant"), [], {"data": bias.tolist(), "dtype": y.type.dtype})
    return b.add(y, b.expand(new_b, shape=list(y.type.shape)))


def _match_batch_norm(node, arrays, producers, uses):
    """(x, W', b', extern node) if `node` is a foldable batch norm, else None."""
    if node.op.name != "batch_norm":
        return None
    stats = [arrays.get(v) for v in node.inputs[1:]]
    if any(s is None for s in stats):
        return None
    mean, var, gamma, beta = (s.astype(np.float64) for s in stats)
    pre = node.inputs[0]
    producer = producers.get(pre)
    conv_bias = np.zeros_like(mean)
    if producer is not None and producer.op.name == "add" and len(uses[pre]) == 1:
        for ext, other in (producer.inputs, producer.inputs[::-1]):
            vector = _channel_vector(other, producers, arrays, mean.shape[0])
            if vector is not None and producers.get(ext) is not None:
                conv_bias, pre = vector, ext
                producer = producers[ext]
                break
    if producer is None or len(uses[pre]) != 1 or producer.inputs[1] not in arrays:
        return None
    w = arrays[producer.inputs[1]].astype(np.float64)
    scale = gamma / np.sqrt(var + node.attrs["eps"])
    if producer.op.name == "conv2d":
        w = w * scale.reshape(-1, 1, 1, 1)
    elif producer.op.name == "matmul" and pre.type.rank == 2 and w.ndim == 2:
        w = w * scale.reshape(1, -1)
    else:
        return None
    dtype = producer.inputs[1].type.dtype
    bias = (conv_bias - mean) * scale + beta
    return producer.inputs[0], round_to_dtype(w.astype(dtype.np), dtype), bias, producer


def _channel_vector(value, producers, arrays, channels):
    """The [C] vector a per-channel bias operand broadcasts (through expands), or None."""
    node = producers.get(value)
    while node is not None and node.op.name == "expand":
        value, node = node.inputs[0], producers.get(node.inputs[0])
    array = arrays.get(value)
    if array is None or array.ndim < 2:
        return None
    if any(n != 1 for i, n in enumerate(array.shape) if i != 1) or array.shape[1] not in (1,
                                                                                       channels):
        return None
    return np.broadcast_to(array.reshape(-1), (channels,)).astype(np.float64)
