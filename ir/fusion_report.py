"""Fusion and memory reports: what `fuse` and `plan_memory` did to one graph, in numbers.

Owns: `count_kernels`, `intermediate_bytes`, `FusionReport` and `report(graph)`.
Spec: spec/fusion.md, "Reports".

A *kernel* is a top-level node that launches work: a region, an extern, a random
draw, a gather, cat or pad.  Top-level index maps are views and creation nodes are
constants the runtime fills; neither is a kernel.  Before fusion every pointwise
and reduction node is its own kernel (what eager PyTorch runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ir.graph import Graph
from ir.ops.registry import CREATION
from ir.passes.fuse import fuse_with_report
from ir.passes.plan_memory import plan_memory
from ir.plan import intermediates, views_in
from ir.types import Dim, is_symbolic, simplify_dim


def count_kernels(graph: Graph) -> int:
    return sum(1 for node in graph.nodes
               if not node.op.index_map and node.op.category != CREATION)


def intermediate_bytes(graph: Graph) -> Dim:
    """Bytes of every top-level intermediate that owns its data (views excluded)."""
    view_of = views_in(graph)
    total = sum((v.type.nbytes() for v in intermediates(graph) if v not in view_of), 0)
    return simplify_dim(total)


@dataclass
class FusionReport:
    kernels_before: int
    kernels_after: int
    bytes_before: Dim  # intermediates of the unfused graph
    bytes_after: Dim  # intermediates left after fusion
    arena_bytes: Dim  # the planned arena holding those
    refusals: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        def b(d):
            return str(d).replace(" ", "")
        return (f"kernels {self.kernels_before} -> {self.kernels_after}; intermediate bytes"
                f" {b(self.bytes_before)} -> {b(self.bytes_after)}; arena {b(self.arena_bytes)}"
                f" bytes for {b(self.bytes_after)} bytes of intermediates;"
                f" {len(self.refusals)} refusal(s)")


def report(graph: Graph, sizes: Optional[dict] = None) -> tuple[Graph, FusionReport]:
    """Fuse and plan `graph`; return the planned graph and its report.  With `sizes`
    (symbol -> int), symbolic byte counts are evaluated there."""
    fused = fuse_with_report(graph)
    planned = plan_memory(fused.graph)

    def at(d):
        return int(d.subs(sizes)) if sizes is not None and is_symbolic(d) else d
    out = FusionReport(count_kernels(graph), count_kernels(planned),
                       at(intermediate_bytes(graph)), at(intermediate_bytes(planned)),
                       at(planned.plan.arena_bytes()), fused.refusals)
    return planned, out
