"""The `fuse_scatters` pass: a `slice_scatter` takes in the pointwise region that computes
its window's new value, so the kernel computes each element where it stores it.

Owns: the `scatter` region kind's construction.  Must not know: backends, memory planning.
Spec: spec/fusion.md, "Scatter regions"; why: spec/memory.md, "Writes in place".
"""

from __future__ import annotations

from ir.graph import Graph, Node, Value
from ir.ops.fused import FUSED_OP
from ir.passes.registry import register_pass


@register_pass("fuse_scatters")
def fuse_scatters(g: Graph) -> Graph:
    """Merge each top-level `slice_scatter x, src` whose src is the one result of a
    pointwise region read by nothing else into one `fused {kind="scatter"}` node, at the
    scatter's place: the region's body, then the scatter of its result into x (x is the
    body input the region already had for it, or a new one).

    Rewrites: those pairs only.  Never touches: a src read by another node or returned, a
    region with several results or another kind, effectful regions.  Requires: a verified
    graph after `fuse`.  Preserves: every value's type and every result exactly (the same
    ops, computed later: the region's only reader is the scatter, so nothing between the
    two read its result).  Idempotent (a scatter region's src is in its body).
    """
    producers = g.producers()
    uses = g.uses()
    outputs = set(g.outputs)
    merged: dict[Node, Node] = {}  # scatter node -> its region node
    absorbed: set = set()
    for node in g.nodes:
        if node.op.name != "slice_scatter" or node.body is not None:
            continue
        x, src = node.inputs
        region = producers.get(src)
        if region is None or region.body is None or region.attrs.get("kind") != "pointwise" \
                or len(region.outputs) != 1 or src in outputs or len(uses.get(src, ())) != 1 \
                or any(n.op.effects for n in region.body.walk()):
            continue
        merged[node] = _scatter_region(node, region)
        absorbed.add(region)
    if not merged:
        return g
    nodes = [merged.get(n, n) for n in g.nodes if n not in absorbed]
    return g.with_nodes(nodes)


def _scatter_region(scatter: Node, region: Node) -> Node:
    x, _ = scatter.inputs
    body = region.body
    inputs, params = list(region.inputs), list(body.inputs)
    if x in inputs:
        x_param = params[inputs.index(x)]
    else:
        x_param = Value(x.type, "base")
        inputs.append(x)
        params.append(x_param)
    out = Value(scatter.outputs[0].type)
    inner = Node(scatter.op, [x_param, body.outputs[0]], dict(scatter.attrs), [out])
    new_body = Graph(f"{body.name}_scatter", params, list(body.nodes) + [inner], [out])
    return Node(FUSED_OP, inputs, {"kind": "scatter"}, list(scatter.outputs), new_body)
