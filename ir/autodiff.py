"""Reverse-mode differentiation of a graph: the joint graph and its partition.

Owns: `joint(graph, wants_grad, grad_outputs) -> Joint`, which derives a backward graph
from each op's VJP rule (ir/ops/, `vjp=`) and splits the work between a forward graph
(the original outputs, then the tensors it saves) and a backward graph (saved tensors
and output gradients in, input gradients out).  Both are ordinary graphs: printable,
parsable, and run through the whole pipeline like any other.  Must not know: torch,
the frontend, any backend.  Spec: spec/autograd.md.

Contract:
- Gradients flow back from the outputs named in `grad_outputs` (floating ones only) to
  the inputs named in `wants_grad`.  An input that no differentiable path reaches gets
  no gradient (`Joint.grad_inputs` omits it; autograd then leaves its `.grad` None, as
  eager does).  Gradients reaching one value from several uses are added.
- A node on a differentiable path whose op has no VJP raises `NotDifferentiable` naming
  the op, so the caller can fall back; a VJP that needs a static size raises
  NotImplementedError.  Nothing is silently dropped.
- The forward graph has the input graph's inputs and outputs, then one output per saved
  intermediate.  The backward graph's inputs are, in order: the forward inputs it reads
  (`saved_inputs`), the saved intermediates, the gradients of `grad_outputs`.

The reasoning this code cites is in spec/autograd.md: Note [Partition rule], Note [Caller
tensors eager does not save], Note [Recomputed sizes], Note [Given gradients], Note
[Checkpointed values].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ir.builder import GraphBuilder
from ir.graph import Graph, Node, Value
from ir.layout import view_strides
from ir.ops.registry import CREATION, LAYOUT, POINTWISE, RANDOM
from ir.types import is_symbolic

RECOMPUTE_CREATION = frozenset({"full", "arange", "constant"})
SYMBOLIC_DIM_GUESS = 64  # a dynamic size counts as this many elements in the byte rule


class NotDifferentiable(Exception):
    """A differentiable path runs through an op without a VJP."""


@dataclass
class Joint:
    forward: Graph
    backward: Graph
    n_outputs: int  # the original outputs; forward.outputs[n_outputs:] are saved
    saved_inputs: list[int]  # forward input indices the backward reads, in its input order
    grad_outputs: list[int]  # output indices whose gradients the backward takes
    grad_inputs: list[int]  # input indices the backward returns gradients for, in order
    recomputed: int = 0  # forward nodes the backward recomputes
    saved_names: list[str] = field(default_factory=list)
    recompute: frozenset = frozenset()  # the forward values the backward recomputes
    source: Optional[Graph] = None  # the differentiated graph (backward_for)
    diff: frozenset = frozenset()  # its differentiable values
    # of saved_inputs, those the backward reads for their sizes only (Note [Recomputed sizes])
    sizes_only: list[int] = field(default_factory=list)
    # the forward values of the VJP nodes moved into the forward (Note [Row statistics
    # saved by the forward])
    hoisted: tuple = ()

    @property
    def n_saved(self) -> int:
        return len(self.forward.outputs) - self.n_outputs

    def saved_bytes(self) -> int:
        """Bytes of the saved intermediates (static sizes; dynamic ones guessed)."""
        return sum(value_bytes(v) for v in self.forward.outputs[self.n_outputs:])


def value_bytes(v: Value) -> int:
    n = 1
    for d in v.type.shape:
        n *= SYMBOLIC_DIM_GUESS if is_symbolic(d) else int(d)
    return n * v.type.dtype.itemsize


def recomputable(node: Node) -> bool:
    """See Note [Partition rule]."""
    if node.op.effects or node.body is not None:
        return False
    # View-like layout ops are the index maps (OpDef.index_map, Note [Op facts]).
    cat, name = node.op.category, node.op.name
    return cat == POINTWISE or (cat == LAYOUT and node.op.index_map) or \
        (cat == CREATION and name in RECOMPUTE_CREATION)


def differentiable_values(graph: Graph, wants_grad) -> set:
    """Floating and complex values that depend on an input that wants a gradient."""
    diff = {v for v, w in zip(graph.inputs, wants_grad) if w and v.type.dtype.is_inexact}
    for node in graph.nodes:
        if node.op.name == "stop_gradient":  # Note [Stopped gradients] (ir/ops/pointwise.py)
            continue
        if any(v in diff for v in node.inputs):
            diff.update(v for v in node.outputs if v.type.dtype.is_inexact)
    return diff


def joint(graph: Graph, wants_grad, grad_outputs, checkpointed=frozenset()) -> Joint:
    """Forward and backward graphs for `graph`; see the module docstring.
    `checkpointed`: values to recompute (Note [Checkpointed values])."""
    diff = differentiable_values(graph, wants_grad)
    kept_outputs = [i for i in grad_outputs if graph.outputs[i] in diff]
    live_nodes, g_inputs, grads = _derive(graph, diff, kept_outputs, set(kept_outputs))
    grad_inputs = [i for i, v in enumerate(graph.inputs)
                   if wants_grad[i] and v in grads]
    bwd_outputs = [grads[graph.inputs[i]] for i in grad_inputs]
    # Note [Row statistics saved by the forward]
    # With one differentiable output only, so that no backward for fewer given gradients
    # (`backward_for`) needs a value the moved nodes read (an amax's tie count moved
    # beside two other outputs made invalid IR: corpus grad_max_dim_ties)
    hoisted, stats = _row_statistics(live_nodes, g_inputs, frozenset(checkpointed)) \
        if len(kept_outputs) == 1 else ([], frozenset())
    forward = graph
    if hoisted:
        moved = set(hoisted)
        live_nodes = [n for n in live_nodes if n not in moved]
        forward = Graph(graph.name, graph.inputs, graph.nodes + hoisted, graph.outputs)
    j = _partition(forward, live_nodes, g_inputs, bwd_outputs, kept_outputs, grad_inputs,
                   frozenset(checkpointed), _not_saved_by_eager(graph, diff), stats)
    j.hoisted = tuple(n.outputs[0] for n in hoisted)
    j.source, j.diff = graph, frozenset(diff)
    return j


# Note [Row statistics saved by the forward]: layer_norm's (and rms_norm's) VJP rebuilds the
# row statistics from the norm's input x: mean, the centred squares' mean, rstd and x-hat,
# nodes that read no gradient.  Left in the backward, the partition recomputed x (GELU of
# the saved h, in the MLP of bench.whole_step) and the backward ran a row kernel for them
# (GELU, two passes of sums, x-hat stored: 0.45 ms of a 13.7 ms step) where eager saves
# mean and rstd.  So the backward's nodes that read no gradient and lie at or below a
# float mean/sum reduction (with the gradient-free nodes they read) move into the forward
# graph before the partition, and those at or below the reduction are never recomputed:
# the partition saves what the backward reads of them (x-hat and rstd, not x), the
# forward's row kernel stores them beside the norm's output (decomposition and CSE merge
# the VJP's mean and centred squares with the forward's own, built the same way).
# Recomputing x-hat from saved statistics instead puts a pointwise value that two
# backward regions read into one of them (session 18, bench/TRAINING.md).  A backward for
# fewer given gradients (`backward_for`) derives its VJPs again: its gradient-free nodes
# with the structural key of a moved one read the forward's value.  Not for statistics of
# a half-precision input widened to f32 (the norms' VJP under autocast, `_in_opmath`): the
# f32 x-hat saved would take twice the bytes of the bf16 x it replaces; nor of a
# checkpointed value (Note [Checkpointed values]: the backward recomputes it, and saving
# its x-hat would keep what checkpointing frees).
_STAT_REDUCTIONS = frozenset({"mean", "sum"})


def _forward_only(nodes: list[Node], g_inputs) -> list[Node]:
    """The nodes that read no gradient (only forward values and each other)."""
    tainted = set(g_inputs)
    out = []
    for node in nodes:
        if node.op.effects or node.body is not None or node.op.category == RANDOM or \
                len(node.outputs) != 1 or any(v in tainted for v in node.inputs):
            tainted.update(node.outputs)
        else:
            out.append(node)
    return out


def _over_rows(node: Node) -> bool:
    """Does the reduction reduce trailing dims only (a norm's row statistics)?  A
    BatchNorm's statistics (over N, H, W) are not: its x-hat is the whole activation,
    which the partition recomputes from what it saves anyway (saving it made cnn_train
    save 22.5 MB where eager saves 18.5)."""
    rank = len(node.inputs[0].type.shape)
    dims = sorted(d % rank for d in node.attrs.get("dims", ())) if rank else []
    return bool(dims) and dims == list(range(rank - len(dims), rank)) and \
        dims[0] > 0  # a full reduction is no row statistic


def _row_statistics(nodes: list[Node], g_inputs,
                    checkpointed=frozenset()) -> tuple[list[Node], frozenset]:
    """Note [Row statistics saved by the forward]: the backward nodes to move into the
    forward, in order, and the values among them never recomputed."""
    free = _forward_only(nodes, g_inputs)
    below: set = set()
    widened: set = set()  # from a widened half-precision value, or a checkpointed one
    for node in free:
        (out,) = node.outputs
        if any(v in widened or v in checkpointed for v in node.inputs) or \
                (node.op.name == "cast" and (
                node.inputs[0].type.dtype.is_float and
                node.inputs[0].type.dtype.itemsize < out.type.dtype.itemsize)):
            widened.add(out)  # saving the f32 x-hat of a bf16 x would double its bytes
        elif (node.op.name in _STAT_REDUCTIONS and out.type.dtype.is_float and
              _over_rows(node)) or any(v in below for v in node.inputs):
            below.add(out)
    producer = {node.outputs[0]: node for node in free}
    moved: set = set()
    stack = [node for node in free if node.outputs[0] in below]
    while stack:
        node = stack.pop()
        if node not in moved:
            moved.add(node)
            stack.extend(producer[u] for u in node.inputs if u in producer)
    return [node for node in free if node in moved], frozenset(below)


# Note [Gradients in the leaf's layout]: autograd's AccumulateGrad keeps ("steals") the
# gradient a backward returns for a leaf when its strides are the leaf's, and copies it
# into the leaf's layout otherwise -- on every step after `zero_grad()` (set_to_none).
# Eager's formulas produce the leaf's layout: mm's backward makes the gradient of a
# column-major operand (F.linear's w.t()) column-major, so w's gradient is row-major.
# The matmul VJP does the same, reading the forward operands' strides from
# `GraphBuilder.forward_strides` (ir.layout.view_strides), and simplify cancels the two
# transposes: the compiled backward returns `g^T @ x`, as eager does.
def _derive(graph: Graph, diff: set, grad_outputs, given):
    """The backward's live nodes (forward values read directly), one gradient input per
    output in `grad_outputs`, and the gradient of each value reached; gradients flow
    from the outputs in `given` only (Note [Given gradients])."""
    b = GraphBuilder("backward")
    producers = graph.producers()
    b.forward_strides = lambda v: view_strides(v, producers)
    grads: dict[Value, Value] = {}
    parts: dict[Value, list] = {}  # gradients reaching a value, added when it is read
    producer: dict[Value, Node] = {}

    def accumulate(v: Value, g: Value) -> None:
        parts.setdefault(v, []).append(g)

    def total(v: Value) -> Value:
        if v not in grads:
            for n in b.nodes[len(producer):]:
                producer.update(dict.fromkeys(n.outputs, n))
            grads[v] = _sum_parts(b, parts.pop(v), producer)
        return grads[v]

    g_inputs = []
    for i in grad_outputs:
        v = graph.outputs[i]
        g = b.input(f"g{i}", v.type)
        g_inputs.append(g)
        if i in given:
            accumulate(v, g)
    for node in reversed(graph.nodes):
        if not any(out in grads or out in parts for out in node.outputs):
            continue
        if len(node.outputs) != 1:
            raise NotDifferentiable(f"{node.op.name} has {len(node.outputs)} results")
        if not any(v in diff for v in node.inputs):
            continue
        if node.op.vjp is None:
            raise NotDifferentiable(f"op {node.op.name!r} has no VJP rule")
        (out,) = node.outputs
        in_grads = node.op.vjp(b, total(out), out, *node.inputs, **node.attrs)
        for v, g in zip(node.inputs, in_grads):
            if g is not None and v in diff:
                accumulate(v, g)
    # The builder has every VJP's nodes, used or not: keep the live ones.
    for v in graph.inputs:
        if v in parts:
            total(v)
    outputs = [grads[v] for v in graph.inputs if v in grads]
    return _live(b.nodes, outputs), g_inputs, grads


# Note [Split gradients are one cat]: the gradients of the pieces of a split (q, k and v
# cut from one projection) reach the split value as zero-padded slices, one per piece;
# added, they cost a padded copy each and a sum over all of them.  Where zero pads of
# one dim tile the value exactly, their sum is the cat of what they pad -- each element
# is one piece's value plus zeros, so the cat is the same value, and it is eager's
# formula (split's backward is a cat).  Other gradients of the value are added to it.
def _sum_parts(b: GraphBuilder, gs: list, producer: dict) -> Value:
    """The sum of the gradients `gs` reaching one value (See Note [Split gradients are
    one cat], Note [Scatters into zeros add into the other gradients])."""
    tiles = _tiling_pads(gs, producer)
    if tiles is not None:
        dim, pieces, pads = tiles
        gs = [b.cat(*pieces, dim=dim)] + [g for g in gs if producer.get(g) not in pads]
    scatter = next((g for g in gs if _adds_into_zeros(g, producer)), None)
    if scatter is not None and len(gs) > 1:
        gs = [g for g in gs if g is not scatter]
    out = gs[0]
    for g in gs[1:]:
        out = b.add(out, g)
    if scatter is not None and out is not scatter:
        node = producer[scatter]
        out = b.index_add(out, *node.inputs[1:], **node.attrs)
    return out


# Note [Scatters into zeros add into the other gradients]: embedding's gradient is an
# index_add of the output gradient's rows into zeros.  Where the weight gets other
# gradients too (a tied embedding: the output projection's weight gradient), adding the
# scatter's result to them is a zero fill, a scatter and an add over the whole weight;
# index_add into their sum is one scatter (ATen's embedding_dense_backward and the add
# cost about what the scatter alone does).  Rows picked more than once are summed into
# the other gradient one by one, where eager first sums them: within rounding.
def _adds_into_zeros(g: Value, producer: dict) -> bool:
    """Whether g is an index_add into a zero fill of g's type."""
    node = producer.get(g)
    if node is None or node.op.name != "index_add":
        return False
    fill = producer.get(node.inputs[0])
    return fill is not None and fill.op.name == "full" and fill.attrs.get("value") == 0 \
        and node.inputs[0].type == g.type


def _tiling_pads(gs: list, producer: dict):
    """(dim, pieces in order, pad nodes) when the zero pads among `gs` tile their value
    along one dim, else None."""
    pads = []
    for g in gs:
        n = producer.get(g)
        if n is None or n.op.name != "pad" or n.attrs.get("value", 0.0) != 0:
            continue
        widths = n.attrs["pads"]
        nonzero = [k for k in range(len(widths) // 2) if widths[2 * k] or widths[2 * k + 1]]
        if len(nonzero) != 1:
            continue
        (x,) = n.inputs
        k = nonzero[0]
        dim = x.type.rank - 1 - k
        before, size, total = widths[2 * k], x.type.shape[dim], g.type.shape[dim]
        if not all(isinstance(s, int) for s in (before, size, total)):
            continue
        pads.append((dim, before, size, total, x, n))
    if len(pads) < 2 or len({p[0] for p in pads}) != 1:
        return None
    pads.sort(key=lambda p: p[1])
    end = 0
    for _, before, size, total, _, _ in pads:
        if before != end:
            return None
        end += size
    if end != pads[0][3]:
        return None
    return pads[0][0], [p[4] for p in pads], frozenset(p[5] for p in pads)


def backward_for(j: Joint, given: frozenset) -> tuple[Graph, list[int]]:
    """The backward graph when only the outputs at positions `given` of j.grad_outputs
    got a gradient, and the forward inputs whose gradients it returns, in order.  Its
    inputs are j.backward's (a gradient that was not given is an unused input); it
    reads the tensors j's forward saved and recomputes as j's partition decided.  Note
    [Given gradients]."""
    if len(given) == len(j.grad_outputs):
        return j.backward, j.grad_inputs
    graph = j.source
    live_nodes, g_inputs, grads = _derive(graph, j.diff, j.grad_outputs,
                                          {j.grad_outputs[k] for k in given})
    grad_inputs = [i for i in j.grad_inputs if graph.inputs[i] in grads]
    bwd_outputs = [grads[graph.inputs[i]] for i in grad_inputs]
    needed = _needed(live_nodes, g_inputs, bwd_outputs)
    producer = graph.producers()
    # Every value read here is read by j.backward too (the same VJPs, fewer of them), so
    # it is a forward input j.backward takes, a saved tensor, or recomputed there.
    recompute, stack = set(), [v for v in needed if v in j.recompute]
    while stack:
        v = stack.pop()
        if v not in recompute:
            recompute.add(v)
            stack.extend(u for u in producer[v].inputs if u in j.recompute)
    saved = j.forward.outputs[j.n_outputs:]
    backward = _assemble(graph, live_nodes, g_inputs, bwd_outputs, j.grad_outputs,
                         grad_inputs, saved, recompute, j.saved_inputs).backward
    return backward, grad_inputs


@dataclass
class EagerSaves:
    """What the tracer knows of eager's autograd nodes beyond the IR ops' `saves` (Note
    [Saved by eager], ir/ops/registry.py).  `instead`: result value -> the values eager's
    node for a torch op the tracer built from several IR ops saves (std: its input and
    result), counted instead of what the IR op making that result saves.  `casts`: the
    result of a cast the tracer inserted for type promotion -> its operand: eager's node
    saves the operand itself (`torch.minimum(b, x)` of a bool b saves b, which the IR
    reads through `cast b`; corpus grad_promoted_operand_modified_missed_raise)."""

    instead: dict = field(default_factory=dict)
    casts: dict = field(default_factory=dict)


def eager_saved(graph: Graph, diff, outputs, extra=None) -> set:
    """The graph's inputs and outputs that eager's autograd saves in the nodes whose
    backward runs when the outputs at indices `outputs` get gradients, or that share
    storage with such a saved value through view ops (a view shares its base's version
    counter).  Eager checks their versions when those nodes run (Note [Saved by eager],
    ir/ops/registry.py); `diff`: the values that require grad; `extra`: see
    saved_by_eager."""
    reached = {graph.outputs[i] for i in outputs if graph.outputs[i] in diff}
    saved = saved_by_eager(graph.nodes, diff, reached, extra=extra)
    find = storage_classes(graph.nodes)
    classes = {find(v) for v in saved}
    return {v for v in [*graph.inputs, *graph.outputs] if find(v) in classes}


def eager_saved_each(graph: Graph, diff, outputs, extra=None) -> dict:
    """`eager_saved(graph, diff, [k], extra)` for each k in `outputs`, in one pass over the
    graph (a bitmask of outputs per value instead of one walk per output)."""
    reach: dict = {}
    for k in outputs:
        if graph.outputs[k] in diff:
            reach[graph.outputs[k]] = reach.get(graph.outputs[k], 0) | 1 << k
    saved: dict = {}

    def save(values, mask):
        for v in values:
            saved[v] = saved.get(v, 0) | mask

    def propagate(node, mask):
        for v in node.inputs:
            if v in diff:
                reach[v] = reach.get(v, 0) | mask
    instead = extra.instead if extra is not None else {}
    for node in reversed(graph.nodes):
        if not any(v in diff for v in node.inputs):
            continue
        mask = 0
        for v in node.outputs:
            mask |= reach.get(v, 0)
        if not mask:
            continue  # every case below needs an output some asked gradient reaches
        if instead and any(v in instead for v in node.outputs):
            for v in node.outputs:
                save(instead.get(v, ()), mask)
            propagate(node, mask)
            continue
        propagate(node, mask)
        saves = node.op.saves
        if node.op.vjp is None or saves == {}:
            continue
        if saves is None or len(node.inputs) != len(node.op.operands) or \
                len(node.outputs) != 1:
            save(node.inputs, mask)
            save(node.outputs, mask)
            continue
        named = dict(zip(node.op.operands, node.inputs), result=node.outputs[0])
        for name, v in zip(node.op.operands, node.inputs):
            if v in diff:
                save([named[s] for s in saves.get(name, ())], mask)
    if extra is not None and extra.casts:
        view_of = {n.outputs[0]: n.inputs[0] for n in graph.nodes if n.op.aliases and n.inputs}

        def operand(v):
            while v in view_of and v not in extra.casts:
                v = view_of[v]
            return extra.casts.get(v)
        moved: dict = {}
        for v, mask in saved.items():
            w = operand(v) or v
            moved[w] = moved.get(w, 0) | mask
        saved = moved
    find = storage_classes(graph.nodes)
    by_class: dict = {}
    for v, mask in saved.items():
        by_class[find(v)] = by_class.get(find(v), 0) | mask
    out = {k: set() for k in outputs}
    for v in [*graph.inputs, *graph.outputs]:
        mask = by_class.get(find(v), 0)
        for k in outputs:
            if mask >> k & 1:
                out[k].add(v)
    return out


def saved_by_eager(nodes, diff, reached=None, without_vjp=False, extra=None) -> set:
    """The values eager's autograd nodes for `nodes` save (Note [Saved by eager]): of
    every node that records one (an operand requires grad), or with `reached` (values
    whose gradient is asked for; updated) of those whose backward runs.  An op without a
    VJP counts only with `without_vjp` (as saving everything): on a path that requires
    grad it runs on the eager backend as the torch call itself, whose node autograd
    records and checks, but an in-place op later in the same graph would be traced
    functionally.  `extra`: an EagerSaves (max(dim)'s gather saves the indices, not the
    input; a promotion cast's operand is saved where the IR saves the cast)."""
    saved: set = set()
    instead = extra.instead if extra is not None else {}
    for node in reversed(nodes):
        if not any(v in diff for v in node.inputs):
            continue
        if instead and any(v in instead for v in node.outputs):
            if reached is None or any(v in reached for v in node.outputs):
                for v in node.outputs:
                    saved.update(instead.get(v, ()))
                if reached is not None:
                    reached.update(v for v in node.inputs if v in diff)
            continue
        if node.op.vjp is None and not without_vjp:
            if reached is not None and any(v in reached for v in node.outputs):
                reached.update(v for v in node.inputs if v in diff)
            continue
        if reached is not None:
            if not any(v in reached for v in node.outputs):
                continue
            reached.update(v for v in node.inputs if v in diff)
        saves = node.op.saves
        if saves == {}:
            continue
        if saves is None or len(node.inputs) != len(node.op.operands) or \
                len(node.outputs) != 1:
            saved.update(node.inputs)  # not recorded: every operand and result count
            saved.update(node.outputs)
            continue
        named = dict(zip(node.op.operands, node.inputs), result=node.outputs[0])
        for name, v in zip(node.op.operands, node.inputs):
            if v in diff:
                saved.update(named[k] for k in saves.get(name, ()))
    if extra is not None and extra.casts:
        # a view of a promotion cast (a broadcast operand) is eager's operand too
        view_of = {n.outputs[0]: n.inputs[0] for n in nodes if n.op.aliases and n.inputs}

        def operand(v):
            while v in view_of and v not in extra.casts:
                v = view_of[v]
            return extra.casts.get(v)
        saved = {operand(v) or v for v in saved}
    return saved


class SavedSoFar:
    """`saved_by_eager(nodes, differentiable_values(...), without_vjp=True, extra=extra)`
    of a graph still being recorded, kept up to date as nodes are appended: each node is
    looked at once, not the whole graph per question (the tracer asks before every
    in-place op).  Nodes are only ever appended; a list that changed otherwise is
    started over."""

    def __init__(self, extra: EagerSaves):
        self.extra = extra
        self._restart()

    def _restart(self) -> None:
        self.count, self.last = 0, None  # nodes looked at, and the last of them
        self.n_inputs = 0
        self.diff: set = set()
        self.saved: set = set()
        self.view_of: dict = {}
        self.root: dict = {}

    def _find(self, v):
        while v in self.root:
            v = self.root[v]
        return v

    def shares_storage(self, inputs, wants_grad, nodes, value) -> bool:
        """Does a value eager saves so far share storage with `value`?"""
        if len(nodes) < self.count or (self.count and nodes[self.count - 1] is not self.last):
            self._restart()
        for v, want in list(zip(inputs, wants_grad))[self.n_inputs:]:
            if want and v.type.dtype.is_inexact:
                self.diff.add(v)
        self.n_inputs = len(inputs)
        new = nodes[self.count:]
        for node in new:
            if any(v in self.diff for v in node.inputs):
                self.diff.update(v for v in node.outputs if v.type.dtype.is_inexact)
            if node.op.aliases and node.inputs:
                self.view_of[node.outputs[0]] = node.inputs[0]
                if self._find(node.outputs[0]) is not self._find(node.inputs[0]):
                    self.root[self._find(node.outputs[0])] = self._find(node.inputs[0])
        self.saved |= saved_by_eager(new, self.diff, without_vjp=True,
                                     extra=EagerSaves(instead=self.extra.instead))
        self.count, self.last = len(nodes), nodes[-1] if nodes else None
        saved = self.saved
        if self.extra.casts:  # as saved_by_eager maps them, over every node so far
            def operand(v):
                while v in self.view_of and v not in self.extra.casts:
                    v = self.view_of[v]
                return self.extra.casts.get(v)
            saved = {operand(v) or v for v in saved}
        target = self._find(value)
        return any(self._find(v) is target for v in saved)


def storage_classes(nodes) -> Callable:
    """find(v): one representative per storage (a view op's result shares its
    operand's: OpDef.aliases)."""
    root: dict = {}

    def find(v):
        while v in root:
            v = root[v]
        return v
    for node in nodes:
        if node.op.aliases and find(node.outputs[0]) is not find(node.inputs[0]):
            root[find(node.outputs[0])] = find(node.inputs[0])
    return find


def _live(nodes: list[Node], outputs: list[Value]) -> list[Node]:
    needed = set(outputs)
    kept = []
    for node in reversed(nodes):
        if any(v in needed for v in node.outputs):
            kept.append(node)
            needed.update(node.inputs)
    return kept[::-1]


def _not_saved_by_eager(graph: Graph, diff) -> frozenset:
    """The graph's inputs and outputs (the tensors the caller holds, and may modify in
    place after the call) that no autograd node of eager's saves, with the values
    sharing their storage (views): Note [Caller tensors eager does not save]."""
    find = storage_classes(graph.nodes)
    saved = {find(v) for v in saved_by_eager(graph.nodes, diff)}
    unsaved = {find(v) for v in [*graph.inputs, *graph.outputs]} - saved
    values = [*graph.inputs, *(v for node in graph.nodes for v in node.outputs)]
    return frozenset(v for v in values if find(v) in unsaved)


def _partition(graph, bwd_nodes, g_inputs, bwd_outputs, grad_outputs, grad_inputs,
               checkpointed, unsaved=frozenset(), stats=frozenset()) -> Joint:
    producer = graph.producers()

    def forced(node: Node) -> bool:  # See Note [Checkpointed values]
        # A copy the materialize pass put on a checkpointed value is checkpointed too.
        inside = node.outputs[0] in checkpointed or \
            (node.op.name == "copy" and node.inputs[0] in checkpointed)
        return inside and len(node.outputs) == 1 and \
            not node.op.effects and node.op.category != RANDOM

    unbound_ok: set = set()   # values whose recomputation would need an unbound size

    def may_recompute(node: Node) -> bool:
        if forced(node):
            return node.outputs[0] not in unbound_ok
        # Note [Caller tensors eager does not save]: recomputing a value from an input or
        # output eager's nodes do not save would make the backward read (and
        # version-check) it.
        reads_unsaved = not node.op.aliases and any(v in unsaved for v in node.inputs)
        if node.outputs[0] in stats and node.op.category != LAYOUT:
            return False  # Note [Row statistics saved by the forward]
        return recomputable(node) and not reads_unsaved and node.outputs[0] not in unbound_ok

    order = {node: k for k, node in enumerate(graph.nodes)}
    forward_inputs = {v: i for i, v in enumerate(graph.inputs)}
    # Forward values the backward reads: each is a forward input, saved, or recomputed.
    needed = _needed(bwd_nodes, g_inputs, bwd_outputs)

    sizes_from: set = set()  # forward inputs the backward reads for their sizes only
    bwd_symbols = set().union(*(_node_symbols(n) for n in bwd_nodes))
    while True:  # Note [Recomputed sizes]
        saved, recompute = _decide(graph, needed, may_recompute, forced, producer, order,
                                   forward_inputs)
        ins = set(_saved_inputs(needed, recompute, producer, forward_inputs)) | sizes_from
        bound = _bound_symbols([graph.inputs[i] for i in ins] + saved + list(g_inputs))
        missing = (bwd_symbols | set().union(*(_symbols(v) for v in recompute))) - bound
        if not missing:
            break
        binders = {i for i, v in enumerate(graph.inputs)
                   if _bound_symbols([v]) & missing} - sizes_from
        if binders:
            sizes_from |= binders
            continue
        unbound = {v for v in recompute if not _symbols(v) <= bound} - unbound_ok
        if not unbound:
            break  # no input binds them: the backend reports it
        unbound_ok.update(unbound)
    read = set(_saved_inputs(needed, recompute, producer, forward_inputs))
    j = _assemble(graph, bwd_nodes, g_inputs, bwd_outputs, grad_outputs, grad_inputs,
                  saved, recompute, sorted(read | sizes_from))
    j.sizes_only = sorted(sizes_from - read)
    return j


def _needed(bwd_nodes, g_inputs, bwd_outputs) -> list:
    """The forward values a backward made of these nodes reads, in first-read order."""
    defined = set(g_inputs) | {v for n in bwd_nodes for v in n.outputs}
    needed = []
    for node in bwd_nodes:
        for v in node.inputs:
            if v not in defined and v not in needed:
                needed.append(v)
    for v in bwd_outputs:  # an input gradient may be a forward value itself (rare)
        if v not in defined and v not in needed:
            needed.append(v)
    return needed


def _symbols(v: Value) -> set:
    return set().union(*(d.free_symbols for d in v.type.shape if is_symbolic(d)))


def _node_symbols(node: Node) -> set:
    """Size symbols in a node's result types and attributes."""
    out = set().union(*(_symbols(v) for v in node.outputs))

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif is_symbolic(x) and hasattr(x, "free_symbols"):
            out.update(x.free_symbols)
    for x in node.attrs.values():
        walk(x)
    return out


def _bound_symbols(values) -> set:
    """Size symbols a graph with these inputs binds (a dim that is a plain symbol)."""
    return {d for v in values for d in v.type.shape if is_symbolic(d) and d.is_Symbol}


def _saved_inputs(needed, recompute, producer, forward_inputs) -> list:
    return sorted({forward_inputs[v] for v in _reads(needed, recompute, producer)
                   if v in forward_inputs})


def _decide(graph, needed, may_recompute, forced, producer, order, forward_inputs):
    outputs = set(graph.outputs)
    saved: list[Value] = []
    saved_set: set = set()
    recompute: set = set()
    leaves_memo: dict = {}

    def leaves(v: Value) -> frozenset:
        """Non-recomputable forward values (not inputs) that recomputing v reads."""
        if v in leaves_memo:
            return leaves_memo[v]
        node = producer.get(v)
        if node is None:
            out = frozenset()
        elif not may_recompute(node):
            out = frozenset([v])
        else:
            out = frozenset().union(*(leaves(u) for u in node.inputs))
        leaves_memo[v] = out
        return out

    def decide(v: Value) -> None:
        if v in forward_inputs or v in saved_set or v in recompute:
            return
        node = producer[v]
        # A graph output the backward reads is saved, not recomputed from the inputs:
        # it is alive anyway, and eager's formula saves it too (exp, tanh, softmax...), so
        # an input modified in place after the graph does not make the backward raise
        # where eager's does not (Note [Saved by eager], ir/ops/registry.py).
        if may_recompute(node) and (forced(node) or v not in outputs):
            kept = sum(value_bytes(u) for u in leaves(v) - saved_set)
            # On a tie a copy is saved: recomputing it is a whole copy in the backward
            # (it exists because a matmul reads it), saving it costs no more memory.
            if forced(node) or kept < value_bytes(v) or \
                    (kept == value_bytes(v) and node.op.name != "copy"):
                recompute.add(v)
                for u in node.inputs:
                    decide(u)
                return
        saved.append(v)
        saved_set.add(v)

    # Later values first: a value near the outputs saved whole spares its whole cone.
    for v in sorted(needed, key=lambda v: -order.get(producer.get(v), -1)):
        decide(v)
    return saved, recompute


def _assemble(graph, bwd_nodes, g_inputs, bwd_outputs, grad_outputs, grad_inputs, saved,
              recompute, saved_inputs) -> Joint:
    # The backward graph: fresh input values for forward inputs and saved tensors.
    env: dict[Value, Value] = {}
    bwd_inputs = []
    for i in saved_inputs:
        v = graph.inputs[i]
        env[v] = Value(v.type, v.name)
        bwd_inputs.append(env[v])
    names = []
    for k, v in enumerate(saved):
        env[v] = Value(v.type, f"saved{k}")
        bwd_inputs.append(env[v])
        names.append(f"saved{k}")
    nodes = []
    for node in graph.nodes:  # recomputed nodes, in forward order
        if node.outputs[0] in recompute:
            outs = [Value(v.type) for v in node.outputs]
            nodes.append(Node(node.op, [env[u] for u in node.inputs], node.attrs, outs,
                              node.body))
            env.update(zip(node.outputs, outs))
    for node in bwd_nodes:
        nodes.append(Node(node.op, [env.get(u, u) for u in node.inputs], node.attrs,
                          node.outputs, node.body))
    backward = Graph("backward", bwd_inputs + list(g_inputs), nodes,
                     [env.get(v, v) for v in bwd_outputs])
    forward = Graph(graph.name, graph.inputs, graph.nodes, list(graph.outputs) + saved)
    return Joint(forward, backward, len(graph.outputs), saved_inputs, list(grad_outputs),
                 grad_inputs, recomputed=len(recompute), saved_names=names,
                 recompute=frozenset(recompute))


def _reads(needed, recompute, producer):
    """Forward inputs read by the backward directly or by a recomputed node."""
    out = set()
    for v in needed:
        if v not in producer:
            out.add(v)
    for v in recompute:
        for u in producer[v].inputs:
            if u not in producer:
                out.add(u)
    return out
