"""Which graph outputs must be copied so that the caller sees eager's aliasing.

Owns: `outputs_to_copy`, `outputs_to_rewrap`, `outputs_maybe_views`,
`fold_clone_copies`.
Spec: spec/correctness.md, "Output aliasing".

Note [Fresh outputs]
A backend may hand back a graph input, one tensor for two outputs, or a view of
either; the caller must see eager's aliasing (spec/correctness.md, "Output aliasing").
The tracer knows eager's aliasing (`TensorVar.alias`: one object per storage); this
module knows which backend results *may* share memory (conservatively, from the final
graph), and `outputs_to_copy` names the outputs where the two disagree, which
`Entry.run` clones before anything else happens.  The converse, an output eager
returns as a new view of an input that the backend hands back as the input object
itself, is `outputs_to_rewrap`: `Entry.run` returns `o.view(o.shape)`.

Note [Tensors the Function holds]
A compiled autograd Function saves some of its forward's results for its backward and
checks their versions there (Note [Saved versions], refcomp/autograd.py).  The passes
may make one of them the very tensor a caller's output is: `v4 = v3 * 1` folds into
`v3`, exp's result, which the backward reads.  Where eager's backward saves that
output's tensor too, sharing is eager's own semantics (a change in place raises in
both); where it does not, the caller gets a clone, so that changing it in place
neither raises where eager does not nor changes what the backward reads (corpus
`grad_folded_identity_output_modified_false_raise`).
"""

from __future__ import annotations

from ir.graph import Graph, Node
from ir.ops.registry import CREATION, EXTERN, LAYOUT, POINTWISE, RANDOM, REDUCTION

_IDENTITY_CAPABLE = frozenset({"cast", "clamp"})


def _may_alias_operands(node: Node, result, opaque_fresh: bool) -> list:
    """The operand positions whose memory `result` (one of `node`'s outputs) may share.

    Layout ops may return a view of their first operand; of the pointwise ops only
    those the eager backend may run as the identity (`cast` to the operand's dtype:
    `Tensor.to`; `clamp` without bounds, codegen/eager.py) may return the operand
    itself, every other pointwise op and every reduction or creation makes a new
    tensor (torch's out-of-place kernels allocate); so does an extern (matmul,
    convolution, pooling, embedding: ATen calls or the backend's out= buffers), whose
    result the caller then gets as the very tensor an opaque call after it saved
    (corpus grad_opaque_input_from_extern_copied_missed_raise; a backend's view of its
    own buffer leaves a compiled autograd Function detached: Note [Views of the
    Function's buffers], refcomp/autograd.py); anything else (composite: a
    decomposition may return its operand) may alias any operand of its dtype (a view
    has its base's dtype: cummax's int64 indices share no memory with its float
    operand, so they are not copied, and an in-place op on them reaches the tensor
    eager's autograd saved: corpus grad_opaque_saved_result_copied_missed_raise).  With
    `opaque_fresh` False (strides), an extern's result counts as sharing its operands'
    memory: its strides are ATen's."""
    cat = node.op.category
    if cat in (REDUCTION, CREATION, RANDOM) or (opaque_fresh and cat == EXTERN):
        # An `aten` node's runner copies every result that shares an operand's memory
        # (codegen/opaque.py), so aminmax's results reach the caller as the very
        # tensors eager's autograd saved (corpus
        # grad_opaque_same_dtype_result_copied_missed_raise).
        return []
    if cat == LAYOUT:
        return [0] if node.inputs else []
    dtype = result.type.dtype
    if cat == POINTWISE:
        return [0] if node.op.name in _IDENTITY_CAPABLE and \
            node.inputs[0].type.dtype == dtype else []
    return [i for i, v in enumerate(node.inputs) if v.type.dtype == dtype]


def output_roots(graph: Graph, opaque_fresh: bool = True) -> list:
    """For each graph output, the set of graph-input positions and producing values it may
    share memory with (a fresh result is its own root).  `opaque_fresh=False` counts an
    `aten` result as sharing its operands' memory anyway (for strides: its are ATen's)."""
    roots: dict = {v: {("in", i)} for i, v in enumerate(graph.inputs)}
    for node in graph.nodes:
        if node.body is not None:
            inner = output_roots(node.body, opaque_fresh)
            for v, r in zip(node.outputs, inner):
                mine = {("val", v)}
                for kind, x in r:
                    if kind == "in":
                        mine |= roots.get(node.inputs[x], set())
                roots[v] = mine
            continue
        for v in node.outputs:
            shared = {("val", v)}
            for i in _may_alias_operands(node, v, opaque_fresh):
                shared |= roots.get(node.inputs[i], set())
            roots[v] = shared
    return [roots.get(v, {("val", v)}) for v in graph.outputs]


def outputs_to_copy(graph: Graph, output_keys: list, input_keys: list,
                    held_from=None, eager_held=frozenset()) -> frozenset:
    """Output indices to clone at run time (Note [Fresh outputs]).

    output_keys[i]: eager's alias identity for output i, or None for an output the
    caller never sees (a mutated input's new value, copied back).  input_keys[j]: the
    same for graph input j.  `held_from`: where `graph` is a compiled autograd
    Function's forward, the index of its first saved output (those after the caller's);
    `eager_held`: the outputs whose tensor eager's backward saves (Note [Tensors the
    Function holds])."""
    copy = set()
    seen: list = []  # (roots, key) of outputs the caller sees, in order
    all_roots = output_roots(graph)
    held = set()
    if held_from is not None:
        held = {r for roots in all_roots[held_from:] for r in roots if r[0] == "val"}
    for i, (roots, key) in enumerate(zip(all_roots, output_keys)):
        if key is None:
            continue
        clash = any(kind == "in" and input_keys[x] is not key for kind, x in roots) or \
            any(k is not key and roots & r for r, k in seen) or \
            (i not in eager_held and bool(roots & held))
        if clash:
            copy.add(i)
            continue  # a clone is fresh: later outputs cannot meet it
        seen.append((roots, key))
    return frozenset(copy)


def outputs_to_rewrap(graph: Graph, output_keys: list, input_keys: list) -> frozenset:
    """Output indices eager returns as a *view* of an input (same alias) that the backend
    may hand back as the input object itself (a reshape to the same shape compiles to
    nothing): `Entry.run` then returns a new view object, as eager does."""
    out = set()
    for i, (roots, key) in enumerate(zip(output_roots(graph), output_keys)):
        if key is not None and any(kind == "in" and input_keys[x] is key for kind, x in roots):
            out.add(i)
    return frozenset(out)


def outputs_maybe_views(graph: Graph) -> frozenset:
    """Output indices the backend may hand back as a view of another value (an input or
    an intermediate): their strides are that view's, not a fresh result's (Note [Output
    layout] in refcomp/runtime.py: `(x + 1).narrow(1, 0, 1).clone()` folds to the narrow
    view of a kernel's buffer)."""
    return frozenset(i for i, (roots, v) in enumerate(zip(output_roots(graph, False),
                                                          graph.outputs))
                     if roots - {("val", v)})


def fold_clone_copies(graph: Graph, copies) -> Graph:
    """`graph` with each `copy` node whose result is in `copies` (a clone under grad:
    TraceContext.clone_copies) replaced by its operand, for a graph no output of which
    requires grad: no autograd node saves either tensor, so one value serves both and
    `outputs_to_copy` clones where the caller must see two (Note [Clones under grad],
    spec/autograd.md)."""
    if not copies:
        return graph
    to: dict = {}
    nodes = []
    for node in graph.nodes:
        if node.op.name == "copy" and node.outputs[0] in copies:
            to[node.outputs[0]] = to.get(node.inputs[0], node.inputs[0])
            continue
        if any(v in to for v in node.inputs):
            node = Node(node.op, [to.get(v, v) for v in node.inputs], node.attrs,
                        node.outputs, node.body)
        nodes.append(node)
    if not to:
        return graph
    return graph.with_nodes(nodes, [to.get(v, v) for v in graph.outputs])
