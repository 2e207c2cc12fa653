"""Which passes run on a graph, in which order: chosen here, for every graph refcomp compiles
(`optimize_passes`, then on a kernel backend `kernel_passes`), each run through the pass
manager.  Spec: spec/passes.md, "Pipelines".
"""

from __future__ import annotations

from ir.graph import Graph
from ir.ops.registry import COMPOSITE, POINTWISE, REDUCTION
from ir.passes.complex_lowering import has_complex

DEFAULT_PIPELINE = ("decompose", "fold", "simplify", "scatters", "cse", "dce")
# A graph whose ops autograd records one by one keeps eager's composites.
OP_BY_OP_AUTOGRAD_PIPELINE = ("dce",)
# What explain().to_dot draws: the graph as the kernel backends get it.
KERNEL_VIEW_PIPELINE = DEFAULT_PIPELINE + ("fuse", "plan_memory")


def optimize_passes(user_passes, registered, *, op_by_op_autograd: bool) -> list:
    """The passes every graph goes through after capture: `user_passes` when given (the
    `passes` option), else DEFAULT_PIPELINE's registered passes."""
    if user_passes is not None:
        return list(user_passes)
    chosen = OP_BY_OP_AUTOGRAD_PIPELINE if op_by_op_autograd else DEFAULT_PIPELINE
    return [p for p in chosen if p in registered]


def kernel_passes(graph: Graph, options: dict) -> list:
    """The passes a kernel backend runs on `graph` before lowering it."""
    passes = []
    if has_complex(graph):  # kernels load no complex values
        passes.append("lower_complex")
    categories = {n.op.category for n in graph.nodes}
    if COMPOSITE in categories:
        passes.append("decompose")  # leaves pointwise and reduction ops behind
        categories |= {POINTWISE, REDUCTION}
    if options.get("fuse", True) and categories & {POINTWISE, REDUCTION}:
        passes.append("fuse")
        if any(n.op.name == "slice_scatter" for n in graph.nodes):
            passes.append("fuse_scatters")  # spec/fusion.md, "Scatter regions"
    if options.get("plan", True) and graph.plan is None:
        passes.append("plan_memory")
    return passes
