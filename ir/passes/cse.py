"""Common subexpression elimination.  Spec: spec/passes.md, "cse".

Two nodes compute the same thing when they apply the same op to the same operands
with the same attributes; the later one is dropped and its uses read the earlier.
"""

from __future__ import annotations

from ir.facts import has_effects
from ir.graph import Graph, Node, Value
from ir.passes.registry import register_pass
from ir.printer import format_attrs

# Ops whose result does not depend on operand order, bit for bit (IEEE + and * are
# commutative, signed zeros and NaN included).  Not maximum/minimum: numpy's
# maximum(-0.0, 0.0) is 0.0 but maximum(0.0, -0.0) is -0.0.
COMMUTATIVE = frozenset({"add", "mul", "eq", "ne", "logical_and", "logical_or", "logical_xor",
                         "bitwise_and", "bitwise_or", "bitwise_xor"})


@register_pass("cse")
def cse(g: Graph) -> Graph:
    """Merge identical pure nodes.

    Rewrites: a node with the same op, the same operands (after earlier merges; in any
    order for the COMMUTATIVE ops) and the same attributes as an earlier node; its
    results are replaced by the earlier node's.
    Attributes compare by their canonical printed form, so `full 1.0 : f32` and
    `full 1 : i64` (different dtype attributes) stay distinct, as do 0.0 and -0.0.
    Never merges: nodes with effects (random draws each give new numbers), fused nodes
    (their bodies are optimized in place: cse runs recursively inside each body, whose
    operands it does not share with the outside).
    Requires: a verified graph.  Preserves: inputs, outputs (possibly now the same value
    twice), the order of the nodes kept.  Idempotent.
    """
    replace: dict[Value, Value] = {}
    seen: dict[tuple, Node] = {}
    kept = []
    for node in g.nodes:
        inputs = [replace.get(v, v) for v in node.inputs]
        if node.body is not None:
            kept.append(Node(node.op, inputs, node.attrs, node.outputs, cse(node.body)))
            continue
        if inputs != node.inputs:
            node = Node(node.op, inputs, node.attrs, node.outputs)
        if has_effects(node):
            kept.append(node)
            continue
        operand_ids = tuple(v.id for v in inputs)
        if node.op.name in COMMUTATIVE:
            operand_ids = tuple(sorted(operand_ids))
        key = (node.op.name, operand_ids, format_attrs(node))
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = node
            kept.append(node)
        else:
            replace.update(zip(node.outputs, earlier.outputs))
    return g.with_nodes(kept, [replace.get(v, v) for v in g.outputs])
