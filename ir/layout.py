"""Strides of views as the torch-based backends lay them out, and where ATen copies.

Owns: `view_strides` (the strides of a value that is a chain of view ops over a
row-major value), `reshape_strides` (ATen's rule for when a reshape is a view:
`computeStride` in aten/src/ATen/TensorUtils.cpp), and `matmul_reads_in_place`
(whether ATen's CPU matmul reads an operand as it is or copies it first).  Must not
know: torch (these are ATen's rules written out, checked against torch by
tests/ir/test_layout.py), the backends.  Spec: spec/passes.md, "materialize".

The IR has no layouts: a view is an index map of its operand.  The llvm, triton and
eager backends run views as torch views of row-major tensors (kernel outputs, matmul
results and guarded inputs are row-major) and hand them to ATen's matmul, which
copies an operand it cannot read through its strides.  These facts let a pass make
that copy an IR value (Note [Copies], ir/ops/pointwise.py).  They are exact only for
static shapes; with a dynamic size every answer here is None ("not known").
"""

from __future__ import annotations

from typing import Mapping, Optional

from ir.graph import Node, Value
from ir.types import is_symbolic

Strides = tuple[int, ...]


def row_major(shape) -> Strides:
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= max(int(d), 1)
    return tuple(reversed(strides))


def static_shape(v: Value) -> Optional[tuple[int, ...]]:
    if any(is_symbolic(d) for d in v.type.shape):
        return None
    return tuple(int(d) for d in v.type.shape)


def reshape_strides(shape, strides, new_shape) -> Optional[Strides]:
    """Strides of `new_shape` viewing a tensor of `shape`/`strides`, or None where ATen's
    reshape must copy (its computeStride, step for step)."""
    if not shape:
        return tuple(1 for _ in new_shape)
    numel = 1
    for d in shape:
        numel *= d
    if numel == 0:
        return tuple(strides) if tuple(shape) == tuple(new_shape) else row_major(new_shape)
    new = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = strides[d - 1]
                tensor_numel = view_numel = 1
    return tuple(new) if view_d == -1 else None


def view_step(node: Node, strides: Strides) -> Optional[Strides]:
    """Strides of a view node's result from its operand's, as torch's view op makes them;
    None for a reshape that is no view of that layout, or a node that is no view."""
    name, a = node.op.name, node.attrs
    shape = static_shape(node.inputs[0])
    out = static_shape(node.outputs[0])
    if shape is None or out is None:
        return None
    if name == "reshape":
        return reshape_strides(shape, strides, out)
    if name == "permute":
        return tuple(strides[p] for p in a["perm"])
    if name == "slice":
        dim = a["dim"] % len(shape)
        return strides[:dim] + (strides[dim] * a.get("step", 1),) + strides[dim + 1:]
    if name == "squeeze":
        dims = {d % len(shape) for d in a["dims"]} if a["dims"] else \
            {d for d, n in enumerate(shape) if n == 1}
        return tuple(s for d, s in enumerate(strides) if d not in dims or shape[d] != 1)
    if name == "unsqueeze":
        dim = a["dim"] % (len(shape) + 1)
        new = shape[dim] * strides[dim] if dim < len(shape) else 1
        return strides[:dim] + (new,) + strides[dim:]
    if name == "expand":
        lead = len(out) - len(shape)
        return (0,) * lead + tuple(0 if shape[d] == 1 and out[lead + d] != 1 else strides[d]
                                   for d in range(len(shape)))
    return None


def view_strides(v: Value, producers: Mapping[Value, Node]) -> Optional[Strides]:
    """v's strides where v is row-major or a chain of views over a row-major value (any
    non-view result or graph input); None where unknown (dynamic sizes) or where a
    reshape on the way is no view (ATen would copy there)."""
    chain = []
    while v in producers and producers[v].op.aliases:
        chain.append(producers[v])
        v = producers[v].inputs[0]
    shape = static_shape(v)
    if shape is None:
        return None
    strides: Optional[Strides] = row_major(shape)
    for node in reversed(chain):
        strides = view_step(node, strides)
        if strides is None:
            return None
    return strides


def matmul_reads_in_place(shape, strides) -> bool:
    """Whether ATen's CPU matmul reads an operand of this layout without copying it: each
    matrix row-major or column-major with a leading stride at least its extent
    (addmm_impl_cpu_), and for a batched operand the batch dims one strided dim (the
    reshape to [batch, n, m] that matmul makes is a view).  Operands with a size-1 dim
    count as read in place (ATen's strides for those are its own choice)."""
    if len(shape) < 2 or 1 in shape or 0 in shape:
        return True
    n, m = shape[-2:]
    sn, sm = strides[-2:]
    if not ((sm == 1 and sn >= m) or (sn == 1 and sm >= n)):
        return False
    if len(shape) == 2:
        return True
    batch = 1
    for d in shape[:-2]:
        batch *= d
    return reshape_strides(shape, strides, (batch, n, m)) is not None
