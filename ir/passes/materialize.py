"""Copies where ATen would copy anyway, as IR values.  Spec: spec/passes.md, "materialize".

Owns: the `materialize` pass.  The layout facts are ir/layout.py's.
"""

from __future__ import annotations

from ir.graph import Graph, Node, Value
from ir.layout import matmul_reads_in_place, row_major, static_shape, view_step
from ir.ops.registry import lookup
from ir.passes.registry import register_pass
from ir.types import TensorType

_UNKNOWN = None


@register_pass("materialize")
def materialize(g: Graph) -> Graph:
    """Put a `copy` (Note [Copies]) where ATen's matmul would copy an operand.

    Rewrites: a matmul operand that is a view whose strides ATen's matmul cannot read
    (`matmul_reads_in_place`) becomes `copy` of it; a reshape on the way from a value
    to a matmul operand that is no view of its operand's layout (ATen's reshape would
    copy) reads a `copy` of its operand instead.  One copy per value, shared by its
    uses.  Layouts as the torch-based backends make them (ir/layout.py): graph inputs
    and non-view results row-major, views with torch's strides; dynamic shapes are
    left alone.
    Requires: a verified graph.  Preserves: every value (copy is the identity), inputs,
    outputs, the other nodes and their order.  Idempotent.
    Why: the copy then is an IR value, so the partitioner can save the forward's copy
    instead of recomputing it in the backward (Note [Partition rule], spec/autograd.md),
    and a value two matmuls read is copied once.
    """
    producers = g.producers()
    feeds = set()  # values that reach a matmul operand through views only
    for node in g.nodes:
        if node.op.name == "matmul":
            for v in node.inputs:
                while True:
                    feeds.add(v)
                    p = producers.get(v)
                    if p is None or not p.op.aliases:
                        break
                    v = p.inputs[0]
    if not feeds:
        return g
    strides: dict = {}  # view results -> strides, or None where unknown
    copies: dict[Value, Value] = {}
    nodes: list[Node] = []
    copy_op, permute_op = lookup("copy"), lookup("permute")

    def layout(v: Value):
        if v in strides:
            return strides[v]
        shape = static_shape(v)
        return _UNKNOWN if shape is None else row_major(shape)

    def copy_of(v: Value) -> Value:
        if v not in copies:
            out = Value(v.type)
            nodes.append(Node(copy_op, [v], {}, [out]))
            copies[v] = out
        return copies[v]

    def operand_copy(v: Value, s) -> Value:
        """Note [Transposed operand copies]: a copy of a matmul operand whose
        second-to-last dim is the more contiguous of its last two is made of its
        transpose (row-major there) and read through a transposed view, which ATen's
        matmul reads in place: each element copied along the source's contiguous dim."""
        rank = v.type.rank
        if v in copies or rank < 2 or not s[-2] < s[-1]:
            return copy_of(v)
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        shape = list(v.type.shape)
        shape[-2:] = shape[-1], shape[-2]
        t = Value(TensorType(v.type.dtype, tuple(shape), v.type.device))
        nodes.append(Node(permute_op, [v], {"perm": perm}, [t]))
        c = copy_of(t)
        out = Value(v.type)
        nodes.append(Node(permute_op, [c], {"perm": perm}, [out]))
        copies[v] = out
        return out

    for node in g.nodes:
        ins = list(node.inputs)
        if node.op.aliases:
            (out,) = node.outputs
            before = layout(ins[0])
            after = view_step(node, before) if before is not _UNKNOWN else _UNKNOWN
            if after is None and before is not _UNKNOWN and node.op.name == "reshape" \
                    and static_shape(out) is not None:
                # ATen copies here; on a matmul's way the copy becomes an IR value.
                if out in feeds:
                    ins[0] = copy_of(ins[0])
                after = row_major(static_shape(out))
            strides[out] = after
        elif node.op.name == "matmul":
            for k, v in enumerate(ins):
                s, shape = layout(v), static_shape(v)
                if s is not _UNKNOWN and not matmul_reads_in_place(shape, s):
                    ins[k] = operand_copy(v, s)
        nodes.append(node if ins == node.inputs else
                     Node(node.op, ins, node.attrs, node.outputs, node.body))
    if not copies:
        return g
    return g.with_nodes(nodes)
