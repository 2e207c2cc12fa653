"""Algebraic simplification: a table of small named rules on the rewrite engine.

Owns: the `simplify` pass and `RULES`, its rule table (ir/rewrite.py runs it to a
fixed point).  Each rule is keyed by the op it matches and its docstring's first
line is its algebra (`x * 1 -> x`); spec/passes.md lists the same rules (a test
compares the two).  A rule looks at one node (operands already rewritten) and
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

from ir.graph import Graph
from ir.ops.rules import normalize_dim, normalize_dims
from ir.passes.registry import register_pass
from ir.rewrite import RuleTable, rewrite

# Note [Exact rules]: refcomp is held equal to eager PyTorch, bit for bit where the
# reference is exact.  So simplify only applies identities that hold for every value
# of the operand's dtype, including NaN, infinities and signed zeros.

RULES = RuleTable("simplify")
rule = RULES.rule


def _is(value, target) -> bool:
    """value == target, for splat scalars (None means not a known splat)."""
    return value is not None and not _isnan(value) and value == target


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _operand_pairs(node):
    a, b = node.inputs
    return ((a, b), (b, a))


def _zeros(rw, node):
    t = node.output.type
    return rw.emit("full", [], value=0, shape=t.shape, dtype=t.dtype, device=t.device)


def _operand_if_same_type(node):
    """Operand 0 when the node's result has exactly its type (an identity), else None."""
    return node.inputs[0] if node.inputs[0].type == node.output.type else None


def _compose(node, rw, attr):
    """op(op(x, a), b) -> op(x, b), for an op whose last application decides `attr`."""
    inner = rw.producer(node.inputs[0], node.op.name)
    if inner is None:
        return None
    return rw.emit(node.op.name, [inner.inputs[0]], **{attr: node.attrs[attr]})


# --- arithmetic ---------------------------------------------------------------------------
@rule("mul")
def mul_by_one(node, rw):
    """x * 1 -> x   (cast x when 1's dtype decides the result's; not complex)

    torch multiplies a complex x by 1 + 0j, and inf * 0 makes a NaN part."""
    if node.output.type.dtype.is_complex:
        return None
    for x, one in _operand_pairs(node):
        if _is(rw.splat(one), 1):
            return rw.as_type_of(x, node.output)
    return None


@rule("mul")
def mul_by_zero_int(node, rw):
    """x * 0 -> 0   for integer and bool results only (NaN * 0 is NaN)"""
    if not node.output.type.dtype.is_float:
        for x, zero in _operand_pairs(node):
            if _is(rw.splat(zero), 0):
                return _zeros(rw, node)
    return None


@rule("add")
def add_zero(node, rw):
    """x + 0 -> x   for integer or bool x, or float x with 0 = -0.0 (-0.0 + 0.0 is 0.0)

    Not complex: 0 is 0 + 0j, and an imaginary -0.0 becomes 0.0."""
    if node.output.type.dtype.is_complex:
        return None
    for x, zero in _operand_pairs(node):
        z = rw.splat(zero)
        if _is(z, 0) and (not x.type.dtype.is_float or math.copysign(1.0, z) < 0):
            return rw.as_type_of(x, node.output)
    return None


@rule("sub")
def sub_zero(node, rw):
    """x - 0 -> x   (for floats only 0 = +0.0: x - -0.0 is x + 0.0; not complex)"""
    if node.output.type.dtype.is_complex:
        return None
    x, zero = node.inputs
    z = rw.splat(zero)
    if _is(z, 0) and (not x.type.dtype.is_float or math.copysign(1.0, z) > 0):
        return rw.as_type_of(x, node.output)
    return None


@rule("sub")
def sub_self_int(node, rw):
    """x - x -> 0   for integers only (inf - inf is NaN)"""
    if node.inputs[0] is node.inputs[1] and node.output.type.dtype.is_int:
        return _zeros(rw, node)
    return None


@rule("div")
def div_by_one(node, rw):
    """x / 1 -> x   (cast x when it is an integer: true division gives a float)

    Not complex: torch divides by 1 + 0j."""
    if not node.output.type.dtype.is_complex and _is(rw.splat(node.inputs[1]), 1):
        return rw.as_type_of(node.inputs[0], node.output)
    return None


@rule("pow")
def pow_one(node, rw):
    """x ** 1 -> x   (not complex)"""
    if not node.output.type.dtype.is_complex and _is(rw.splat(node.inputs[1]), 1):
        return rw.as_type_of(node.inputs[0], node.output)
    return None


@rule("neg")
def double_negation(node, rw):
    """-(-x) -> x"""
    inner = rw.producer(node.inputs[0], "neg")
    return inner.inputs[0] if inner is not None else None


@rule("logical_not")
def double_logical_not(node, rw):
    """not(not(x)) -> x   (cast x to bool when it is not a bool)"""
    inner = rw.producer(node.inputs[0], "logical_not")
    return rw.as_type_of(inner.inputs[0], node.output) if inner is not None else None


@rule("cast")
def cast_to_same_dtype(node, rw):
    """cast(x, dtype(x)) -> x"""
    return _operand_if_same_type(node)


# --- select -------------------------------------------------------------------------------
@rule("where")
def where_constant_condition(node, rw):
    """where(true, a, b) -> a;  where(false, a, b) -> b   (when the chosen one has the type)"""
    cond, a, b = node.inputs
    c = rw.splat(cond)
    if c is not None:
        return rw.as_type_of(a if c else b, node.output)
    return None


@rule("where")
def where_same_branches(node, rw):
    """where(c, x, x) -> x"""
    if node.inputs[1] is node.inputs[2]:
        return rw.as_type_of(node.inputs[1], node.output)
    return None


# --- layout -------------------------------------------------------------------------------
@rule("reshape")
def reshape_to_same_shape(node, rw):
    """reshape(x, shape(x)) -> x"""
    return _operand_if_same_type(node)


@rule("reshape")
def reshape_of_reshape(node, rw):
    """reshape(reshape(x, a), b) -> reshape(x, b)"""
    return _compose(node, rw, "shape")


@rule("permute")
def identity_permute(node, rw):
    """permute(x, [0, 1, ..., n-1]) -> x"""
    perm = list(node.attrs["perm"])
    return node.inputs[0] if perm == list(range(len(perm))) else None


@rule("permute")
def permute_of_permute(node, rw):
    """permute(permute(x, p), q) -> permute(x, [p[q[0]], p[q[1]], ...])"""
    inner = rw.producer(node.inputs[0], "permute")
    if inner is None:
        return None
    p, q = inner.attrs["perm"], node.attrs["perm"]
    return rw.emit("permute", [inner.inputs[0]], perm=[p[i] for i in q])


@rule("expand")
def expand_to_same_shape(node, rw):
    """expand(x, shape(x)) -> x"""
    return _operand_if_same_type(node)


@rule("expand")
def expand_of_expand(node, rw):
    """expand(expand(x, a), b) -> expand(x, b)"""
    return _compose(node, rw, "shape")


@rule("squeeze")
def squeeze_of_unsqueeze(node, rw):
    """squeeze(unsqueeze(x, d), [d]) -> x"""
    inner = rw.producer(node.inputs[0], "unsqueeze")
    if inner is None or not node.attrs["dims"]:
        return None
    rank = node.inputs[0].type.rank
    if list(normalize_dims(node.attrs["dims"], rank)) == [normalize_dim(inner.attrs["dim"],
                                                                        rank)]:
        return inner.inputs[0]
    return None


@rule("slice")
def whole_slice(node, rw):
    """slice(x, d, 0, size, 1) -> x   (a step-1 slice that keeps the whole dim)"""
    return _operand_if_same_type(node) if node.attrs["step"] == 1 else None


# --- the pass -----------------------------------------------------------------------------
@register_pass("simplify")
def simplify(g: Graph) -> Graph:
    """Apply RULES until none fires (the rewrite engine, ir/rewrite.py).

    Rewrites: a pure node matched by a rule; its uses read the rule's result.  The
    replaced node is dropped; nodes it made unused stay for dce.  Rules see splats
    (`full`, equal-element `constant`, index maps of those) as their scalar.
    Never touches: nodes with effects, fused nodes and their bodies.
    Requires: a verified graph.  Preserves: every value's type, inputs, outputs order,
    results exactly (Note [Exact rules]).  Idempotent (it stops at a fixed point).
    """
    return rewrite(g, RULES)
