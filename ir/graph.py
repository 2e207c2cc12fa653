"""The graph: SSA values, nodes, use lists.  No printing, no passes.

Owns: `Value`, `Node`, `Graph`.  Spec: spec/ir.md, "Graphs".

A `Graph` is a function: named inputs, nodes in a valid execution order, and
outputs.  Every value is defined once (by an input or by exactly one node).  A
node may own a nested `body` graph (a fused region): the body's inputs bind to
the node's operands in order and its outputs are the node's results.

Graphs are treated as values: passes build new graphs (`with_nodes`) instead of
mutating shared ones, so a pass can never corrupt its caller's graph.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Optional

from ir.ops.registry import OpDef
from ir.types import TensorType

_ids = itertools.count()


class Value:
    """One SSA value.  `name` is a hint for printing (inputs always have one)."""

    __slots__ = ("type", "name", "id")

    def __init__(self, type: TensorType, name: Optional[str] = None):
        self.type = type
        self.name = name
        self.id = next(_ids)

    def __repr__(self) -> str:
        label = self.name if self.name is not None else f"v{self.id}"
        return f"%{label}: {self.type}"


class Node:
    """One op application: `outputs = op(inputs, attrs)`, with an optional body graph."""

    __slots__ = ("op", "inputs", "attrs", "outputs", "body", "__weakref__")

    def __init__(self, op: OpDef, inputs: list[Value], attrs: dict, outputs: list[Value],
                 body: Optional["Graph"] = None):
        self.op = op
        self.inputs = list(inputs)
        self.attrs = dict(attrs)
        self.outputs = list(outputs)
        self.body = body

    @property
    def output(self) -> Value:
        """The single result of a one-result node."""
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op.name} has {len(self.outputs)} results, not 1")
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"Node({self.op.name}, {self.inputs} -> {self.outputs})"


class Graph:
    """A function in SSA form: inputs, nodes (in execution order), outputs."""

    def __init__(self, name: str, inputs: list[Value], nodes: list[Node],
                 outputs: list[Value], plan=None):
        self.name = name
        self.inputs = list(inputs)
        self.nodes = list(nodes)
        self.outputs = list(outputs)
        # The memory plan (ir/plan.py, spec/memory.md), or None.  It names this graph's
        # values and steps, so `with_nodes` (a new node list) drops it.
        self.plan = plan

    def with_nodes(self, nodes: Iterable[Node], outputs: Optional[list[Value]] = None) -> Graph:
        """The same function with a new node list (and optionally new outputs)."""
        return Graph(self.name, self.inputs, list(nodes),
                     self.outputs if outputs is None else outputs)

    def producers(self) -> dict[Value, Node]:
        """Map each node-defined value to its node."""
        return {out: node for node in self.nodes for out in node.outputs}

    def uses(self) -> dict[Value, list[Node]]:
        """Use lists: for every value, the nodes that read it (in order, repeats kept)."""
        table: dict[Value, list[Node]] = {v: [] for v in self.inputs}
        for node in self.nodes:
            for out in node.outputs:
                table.setdefault(out, [])
            for operand in node.inputs:
                table.setdefault(operand, []).append(node)
        return table

    def values(self) -> list[Value]:
        return list(self.inputs) + [v for node in self.nodes for v in node.outputs]

    def walk(self) -> Iterable[Node]:
        """Every node, including those inside bodies (pre-order)."""
        for node in self.nodes:
            yield node
            if node.body is not None:
                yield from node.body.walk()

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op.name] = counts.get(node.op.name, 0) + 1
        return counts

    def __str__(self) -> str:
        from ir.printer import print_graph  # printing lives in its own module

        return print_graph(self)

    def __repr__(self) -> str:
        return f"Graph(@{self.name}, {len(self.nodes)} nodes)"
