"""Dead code elimination.  Spec: spec/passes.md, "dce".

Owns: the `dce` pass.  What has effects is `has_effects` (ir/facts.py).
"""

from __future__ import annotations

from ir.facts import has_effects
from ir.graph import Graph, Node
from ir.passes.registry import register_pass


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
