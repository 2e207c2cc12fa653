"""Algebraic simplification: a list of small named rules, applied to a fixed point.

Owns: the `simplify` pass and `RULES`.  Each rule is a function whose docstring's
first line is its algebra (`x * 1 -> x`); spec/passes.md lists the same rules (a
test compares the two).  A rule looks at one node (operands already rewritten) and
returns a value to use instead, of exactly the node's type, or None.
Spec: spec/passes.md, "simplify".

Two things every rule respects (see Note [Exact rules]):
- types: a rule never changes a value's dtype or shape.  `x * 1` with x: i32 and
  1: f32 is f32, so it becomes `cast x to f32`, not x; with x: f32[] and 1: f32[4]
  the result is bigger than x, so the rule does not fire.
- IEEE floats: `x * 0 -> 0` is wrong (NaN * 0 is NaN), `x - x -> 0` is wrong (inf - inf),
  and `x + 0.0 -> x` is wrong for x = -0.0 (-0.0 + 0.0 is +0.0).  Those rules fire
  only for integers, or for the exact float form (`x + -0.0`, `x - 0.0`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

from ir.builder import GraphBuilder
from ir.graph import Graph, Node, Value
from ir.ops.registry import lookup
from ir.ops.rules import normalize_dim, normalize_dims
from ir.passes.dce import has_effects
from ir.passes.fold import splat_value
from ir.passes.registry import register_pass

# Note [Exact rules]: refcomp is held equal to eager PyTorch, bit for bit where the
# reference is exact.  So simplify only applies identities that hold for every value
# of the operand's dtype, including NaN, infinities and signed zeros.


class Rewriter:
    """What a rule sees: producers of values, splat constants, and a way to emit nodes."""

    def __init__(self, builder: GraphBuilder):
        self.builder = builder
        self.producers: dict[Value, Node] = {}
        self._splats: dict[Value, object] = {}  # a big `constant` is scanned once

    def producer(self, value: Value, op: str) -> Optional[Node]:
        """The node defining `value` if it is an `op` node, else None."""
        node = self.producers.get(value)
        return node if node is not None and node.op.name == op else None

    def splat(self, value: Value):
        """The scalar all of `value`'s elements equal, if it is a plain constant, else None."""
        if value not in self._splats:
            self._splats[value] = splat_value(value, self.producers)
        return self._splats[value]

    def emit(self, op: str, inputs: list[Value], **attrs) -> Value:
        return self.builder.insert(lookup(op), inputs, attrs)

    def as_type_of(self, x: Value, out: Value) -> Optional[Value]:
        """x itself if it has out's type, `cast x` if only the dtype differs, else None."""
        if x.type == out.type:
            return x
        if x.type.shape == out.type.shape and x.type.device == out.type.device:
            return self.emit("cast", [x], dtype=out.type.dtype)
        return None


@dataclass(frozen=True)
class Rule:
    name: str
    apply: Callable[[Node, Rewriter], Optional[Value]]

    @property
    def algebra(self) -> str:
        return self.apply.__doc__.strip().splitlines()[0]


RULES: list[Rule] = []


def rule(fn):
    RULES.append(Rule(fn.__name__, fn))
    return fn


def _is(value, target) -> bool:
    """value == target, for splat scalars (None means not a known splat)."""
    return value is not None and not _isnan(value) and value == target


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _operand_pairs(node: Node):
    a, b = node.inputs
    return ((a, b), (b, a))


# --- arithmetic ---------------------------------------------------------------------------
@rule
def mul_by_one(node, rw):
    """x * 1 -> x   (cast x when 1's dtype decides the result's)"""
    if node.op.name == "mul":
        for x, one in _operand_pairs(node):
            if _is(rw.splat(one), 1):
                return rw.as_type_of(x, node.output)
    return None


@rule
def mul_by_zero_int(node, rw):
    """x * 0 -> 0   for integer and bool results only (NaN * 0 is NaN)"""
    if node.op.name == "mul" and not node.output.type.dtype.is_float:
        for x, zero in _operand_pairs(node):
            if _is(rw.splat(zero), 0):
                t = node.output.type
                return rw.emit("full", [], value=0, shape=t.shape, dtype=t.dtype,
                               device=t.device)
    return None


@rule
def add_zero(node, rw):
    """x + 0 -> x   for integer or bool x, or float x with 0 = -0.0 (-0.0 + 0.0 is 0.0)"""
    if node.op.name == "add":
        for x, zero in _operand_pairs(node):
            z = rw.splat(zero)
            if _is(z, 0) and (not x.type.dtype.is_float or math.copysign(1.0, z) < 0):
                return rw.as_type_of(x, node.output)
    return None


@rule
def sub_zero(node, rw):
    """x - 0 -> x   (for floats only 0 = +0.0: x - -0.0 is x + 0.0)"""
    if node.op.name == "sub":
        x, zero = node.inputs
        z = rw.splat(zero)
        if _is(z, 0) and (not x.type.dtype.is_float or math.copysign(1.0, z) > 0):
            return rw.as_type_of(x, node.output)
    return None


@rule
def sub_self_int(node, rw):
    """x - x -> 0   for integers only (inf - inf is NaN)"""
    if node.op.name == "sub" and node.inputs[0] is node.inputs[1]:
        t = node.output.type
        if t.dtype.is_int:
            return rw.emit("full", [], value=0, shape=t.shape, dtype=t.dtype, device=t.device)
    return None


@rule
def div_by_one(node, rw):
    """x / 1 -> x   (cast x when it is an integer: true division gives a float)"""
    if node.op.name == "div" and _is(rw.splat(node.inputs[1]), 1):
        return rw.as_type_of(node.inputs[0], node.output)
    return None


@rule
def pow_one(node, rw):
    """x ** 1 -> x"""
    if node.op.name == "pow" and _is(rw.splat(node.inputs[1]), 1):
        return rw.as_type_of(node.inputs[0], node.output)
    return None


@rule
def double_negation(node, rw):
    """-(-x) -> x"""
    inner = rw.producer(node.inputs[0], "neg") if node.op.name == "neg" else None
    return inner.inputs[0] if inner is not None else None


@rule
def double_logical_not(node, rw):
    """not(not(x)) -> x   (cast x to bool when it is not a bool)"""
    inner = rw.producer(node.inputs[0], "logical_not") if node.op.name == "logical_not" \
        else None
    return rw.as_type_of(inner.inputs[0], node.output) if inner is not None else None


@rule
def cast_to_same_dtype(node, rw):
    """cast(x, dtype(x)) -> x"""
    if node.op.name == "cast" and node.inputs[0].type == node.output.type:
        return node.inputs[0]
    return None


# --- select -------------------------------------------------------------------------------
@rule
def where_constant_condition(node, rw):
    """where(true, a, b) -> a;  where(false, a, b) -> b   (when the chosen one has the type)"""
    if node.op.name == "where":
        cond, a, b = node.inputs
        c = rw.splat(cond)
        if c is not None:
            return rw.as_type_of(a if c else b, node.output)
    return None


@rule
def where_same_branches(node, rw):
    """where(c, x, x) -> x"""
    if node.op.name == "where" and node.inputs[1] is node.inputs[2]:
        return rw.as_type_of(node.inputs[1], node.output)
    return None


# --- layout -------------------------------------------------------------------------------
@rule
def reshape_to_same_shape(node, rw):
    """reshape(x, shape(x)) -> x"""
    if node.op.name == "reshape" and node.inputs[0].type == node.output.type:
        return node.inputs[0]
    return None


@rule
def reshape_of_reshape(node, rw):
    """reshape(reshape(x, a), b) -> reshape(x, b)"""
    inner = rw.producer(node.inputs[0], "reshape") if node.op.name == "reshape" else None
    if inner is None:
        return None
    return rw.emit("reshape", [inner.inputs[0]], shape=node.attrs["shape"])


@rule
def identity_permute(node, rw):
    """permute(x, [0, 1, ..., n-1]) -> x"""
    if node.op.name == "permute" and list(node.attrs["perm"]) == list(range(len(
            node.attrs["perm"]))):
        return node.inputs[0]
    return None


@rule
def permute_of_permute(node, rw):
    """permute(permute(x, p), q) -> permute(x, [p[q[0]], p[q[1]], ...])"""
    inner = rw.producer(node.inputs[0], "permute") if node.op.name == "permute" else None
    if inner is None:
        return None
    p, q = inner.attrs["perm"], node.attrs["perm"]
    return rw.emit("permute", [inner.inputs[0]], perm=[p[i] for i in q])


@rule
def expand_to_same_shape(node, rw):
    """expand(x, shape(x)) -> x"""
    if node.op.name == "expand" and node.inputs[0].type == node.output.type:
        return node.inputs[0]
    return None


@rule
def expand_of_expand(node, rw):
    """expand(expand(x, a), b) -> expand(x, b)"""
    inner = rw.producer(node.inputs[0], "expand") if node.op.name == "expand" else None
    if inner is None:
        return None
    return rw.emit("expand", [inner.inputs[0]], shape=node.attrs["shape"])


@rule
def squeeze_of_unsqueeze(node, rw):
    """squeeze(unsqueeze(x, d), [d]) -> x"""
    inner = rw.producer(node.inputs[0], "unsqueeze") if node.op.name == "squeeze" else None
    if inner is None or not node.attrs["dims"]:
        return None
    rank = node.inputs[0].type.rank
    if list(normalize_dims(node.attrs["dims"], rank)) == [normalize_dim(inner.attrs["dim"],
                                                                        rank)]:
        return inner.inputs[0]
    return None


@rule
def whole_slice(node, rw):
    """slice(x, d, 0, size, 1) -> x   (a step-1 slice that keeps the whole dim)"""
    if node.op.name == "slice" and node.attrs["step"] == 1 \
            and node.inputs[0].type == node.output.type:
        return node.inputs[0]
    return None


# --- the pass -----------------------------------------------------------------------------
@register_pass("simplify")
def simplify(g: Graph) -> Graph:
    """Apply RULES until none fires.

    Rewrites: a pure node matched by a rule; its uses read the rule's result.  The
    replaced node is dropped; nodes it made unused stay for dce.  Rules see splats
    (`full`, equal-element `constant`, layout ops of those) as their scalar.
    Never touches: nodes with effects, fused nodes and their bodies.
    Requires: a verified graph.  Preserves: every value's type, inputs, outputs order,
    results exactly (Note [Exact rules]).  Idempotent (it stops at a fixed point).
    """
    for _ in range(len(g.nodes) + 2):
        g, fired = _sweep(g)
        if not fired:
            return g
    raise RuntimeError(f"simplify did not reach a fixed point on @{g.name}; last: {fired}")


def _sweep(g: Graph) -> tuple[Graph, list[str]]:
    """One pass over the nodes in order; returns the new graph and the rules that fired."""
    builder = GraphBuilder(g.name)
    builder.inputs = list(g.inputs)
    rw = Rewriter(builder)
    replace: dict[Value, Value] = {}
    fired: list[str] = []
    for node in g.nodes:
        inputs = [replace.get(v, v) for v in node.inputs]
        if inputs != node.inputs:
            node = Node(node.op, inputs, node.attrs, node.outputs, node.body)
        start = len(builder.nodes)
        result = None
        if node.body is None and not has_effects(node):
            result = _first_rule(node, rw, fired)
        if result is None:
            del builder.nodes[start:]
            builder.nodes.append(node)
        else:
            replace[node.output] = result
        for new in builder.nodes[start:]:
            rw.producers.update((out, new) for out in new.outputs)
    return g.with_nodes(builder.nodes, [replace.get(v, v) for v in g.outputs]), fired


def _first_rule(node: Node, rw: Rewriter, fired: list[str]) -> Optional[Value]:
    for r in RULES:
        start = len(rw.builder.nodes)
        result = r.apply(node, rw)
        if result is None:
            del rw.builder.nodes[start:]  # a rule that gave up leaves nothing behind
            continue
        if result.type != node.output.type:
            raise AssertionError(f"simplify rule {r.name} changed {node.output.type}"
                                 f" into {result.type}")
        fired.append(r.name)
        return result
    return None
