"""What passes ask about nodes and values: effects, known constants, views.

Owns: `has_effects` (the one definition of "this node must run"), `touches_rng`, `Const` and the
reading of constant values (`constant_of`, `splat_value`, `constant_arrays`), and
`view_root`.  Every pass and the rewrite engine import these from here, so no pass
depends on another for a helper.  Answers come from the op facts on `OpDef`
(Note [Op facts] in ir/ops/registry.py), never from lists of op names.
Spec: spec/passes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from ir.graph import Graph, Node, Value
from ir.interpreter import run
from ir.types import round_to_dtype

# Operands are materialized for evaluation only up to this many elements.
MAX_EVAL_NUMEL = 1 << 16


def has_effects(node: Node) -> bool:
    """True if `node` must run even when unused: an effectful op, or a body holding one."""
    if node.op.effects:
        return True
    return node.body is not None and any(inner.op.effects for inner in node.body.walk())


def touches_rng(node: Node) -> bool:
    """True if `node` draws from (or seeds, saves, restores) the random stream: a random
    op, or an `aten` node tagged `rng` (ir/ops/opaque.py).  Running it again would
    change what later draws give."""
    from ir.ops.registry import RANDOM

    if node.op.category == RANDOM or node.op.name == "aten" and node.attrs.get("rng"):
        return True
    return node.body is not None and any(touches_rng(inner) for inner in node.body.walk())


def view_root(value: Value, producers: Mapping[Value, Node]) -> tuple[Value, list[Node]]:
    """Follow index maps back to the value they read: (root, maps from root to value)."""
    chain: list[Node] = []
    node = producers.get(value)
    while node is not None and node.op.index_map:
        chain.insert(0, node)
        value = node.inputs[0]
        node = producers.get(value)
    return value, chain


# --- constants --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Const:
    """A known value: a splat (one scalar, any shape, maybe symbolic) or a small array."""

    splat: object = None  # Python scalar, already rounded to the value's dtype
    array: Optional[np.ndarray] = None

    def materialize(self, value: Value) -> Optional[np.ndarray]:
        if self.array is not None:
            return self.array
        t = value.type
        if not t.is_static or int(t.numel()) > MAX_EVAL_NUMEL:
            return None
        return np.full(tuple(int(d) for d in t.shape), self.splat, t.dtype.np)


def constant_of(node: Node) -> Optional[Const]:
    """The value of a creation node (full, constant, static arange), else None."""
    name = node.op.name
    if name == "full":
        return Const(splat=scalar_of(node.attrs["value"], node.output))
    if name == "constant":
        return as_const(np.array(node.attrs["data"], dtype=node.output.type.dtype.np))
    if name == "arange" and node.output.type.is_static and \
            int(node.output.type.numel()) <= MAX_EVAL_NUMEL:
        return as_const(run(Graph("arange", [], [node], node.outputs), [])[0])
    return None


def as_const(array: np.ndarray) -> Const:
    """A splat if every element is equal (NaNs count as equal) or there are none."""
    flat = array.reshape(-1)
    if flat.size == 0:
        return Const(splat=np.zeros((), array.dtype).item())
    first = flat[0]
    nan = isinstance(first, np.floating) and bool(np.isnan(first))
    same = np.isnan(flat).all() if nan else bool((flat == first).all())
    if same and not (first == 0 and array.dtype.kind == "f" and _mixed_zero_signs(flat)):
        return Const(splat=first.item())
    return Const(array=array)


def _mixed_zero_signs(flat: np.ndarray) -> bool:
    signs = np.signbit(flat)
    return bool(signs.any() and not signs.all())


def scalar_of(value, v: Value):
    """`value` as a Python scalar of v's dtype (so `full {value=...}` prints it exactly)."""
    array = round_to_dtype(np.asarray(value).astype(v.type.dtype.np), v.type.dtype)
    return array.item()


def splat_value(value: Value, producers: Mapping[Value, Node]):
    """The scalar every element of `value` equals, if the IR says so plainly, else None.

    A `full`, a `constant` with all elements equal, or an index map of a splat.
    """
    node = producers.get(value)
    while node is not None and node.op.index_map:
        node = producers.get(node.inputs[0])
    if node is None or node.op.name not in ("full", "constant"):
        return None
    return constant_of(node).splat


def constant_arrays(g: Graph) -> dict[Value, np.ndarray]:
    """Arrays for values defined by `constant` and static `full` nodes of `g`."""
    table = {}
    for node in g.nodes:
        if node.op.name in ("constant", "full"):
            array = constant_of(node).materialize(node.output)
            if array is not None:
                table[node.output] = array
    return table
