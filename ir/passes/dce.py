"""Dead code elimination, and the one definition of "this node has effects".

Owns: the `dce` pass and `has_effects(node)`, which fold and cse also use to decide
what they must leave alone.  Spec: spec/passes.md, "dce".
"""

from __future__ import annotations

from ir.graph import Graph, Node
from ir.passes.registry import register_pass


def has_effects(node: Node) -> bool:
    """True if `node` must run even when unused: an effectful op, or a body holding one."""
    if node.op.effects:
        return True
    return node.body is not None and any(inner.op.effects for inner in node.body.walk())


@register_pass("dce")
def dce(g: Graph) -> Graph:
    """Drop nodes whose results are unused.

    Rewrites: a node none of whose results is used (by a live node or the graph's
    outputs) and that has no effects; inside a fused body, body nodes that do not
    reach the body's outputs.  Never removes: effectful nodes (random draws), nor
    fused nodes' results (a body keeps all its outputs).
    Requires: a verified graph.  Preserves: inputs, outputs and their order; every
    effectful node and the relative order of all kept nodes.  Idempotent.
    """
    live = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if has_effects(node) or live.intersection(node.outputs):
            if node.body is not None:
                node = Node(node.op, node.inputs, node.attrs, node.outputs, dce(node.body))
            kept.append(node)
            live.update(node.inputs)
    kept.reverse()
    return g.with_nodes(kept)
