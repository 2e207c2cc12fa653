"""`options={"freeze": True}`: a module's parameters and buffers as compile-time values.

Owns: deciding whether one graph may be frozen (`freeze_entry`), the rewrite
(`freeze_graph`: constant subexpressions of parameters evaluated once, batch norms
folded into the conv/linear before them), the guards that keep it sound
(TENSOR_VERSION on every tensor whose value was read, EQUALS_MATCH on the owners'
`training`) and the call wrapper that feeds the precomputed tensors.  Must not know
bytecode.  Spec: spec/guards.md, "Freezing".

Note [Frozen values stay tensors]: `ir.passes.fold.freeze` makes parameters `constant`
nodes, whose data is a nested Python list in the IR.  A 64x64x3x3 weight (37k floats)
then costs ~0.8 s of pipeline (every verify prints it, cse hashes it), growing with
the weight; a real model would take minutes.  So here the values computed from
parameters (a linear's transposed weight, a conv bias reshaped, W' and b' of a folded
batch norm) stay *graph inputs*: the entry computes them once (the eager backend on
the real tensors) and passes them after the caller's inputs at every call.  The
graph is what `fold.freeze` would give, less the literal data; the batch-norm algebra
is fold.py's own (`_match_batch_norm`), so there is one definition of it.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from codegen.backends import get_backend
from ir.builder import GraphBuilder
from ir.facts import has_effects
from ir.graph import Graph, Node, Value
from ir.ops.registry import CREATION, FUSED, RANDOM
from ir.passes.dce import dce
from ir.passes.fold import _match_batch_norm
from ir.types import TensorType
from refcomp import guards as G
from refcomp.sources import BUFFER, PARAM, AttrSource


class Frozen:
    """What freezing did to one graph: the new graph, how to call it, guards, notes."""

    def __init__(self, graph: Graph, plan: list, guards: list, notes: list):
        self.graph = graph
        self.plan = plan  # per graph input: ("in", index of the entry's input) | ("held", t)
        self.guards = guards
        self.notes = notes

    def wrap(self, fn, n_inputs: int):
        """`call(*entry inputs)`: fn on the kept inputs, then the held tensors."""
        namespace, operands = {"fn": fn}, []
        for kind, x in self.plan:
            if kind == "in":
                operands.append(f"a{x}")
            else:
                name = f"k{len(namespace)}"
                namespace[name] = x
                operands.append(name)
        args = ", ".join(f"a{i}" for i in range(n_inputs))
        text = f"def call({args}):\n    return fn({', '.join(operands)})\n"
        exec(compile(text, "<refcomp frozen call>", "exec"), namespace)
        call = namespace["call"]
        call.__dict__.update(getattr(fn, "__dict__", {}))  # .compiled, .plan_source...
        call.unfrozen = fn
        return call


def freeze_entry(ctx, graph: Graph, guard_list: list) -> Frozen:
    """Freeze the module state of `graph` (traced by `ctx`), or say why not.

    Candidates: inputs read from a module's `_parameters`/`_buffers` that the graph
    does not mutate.  Refused for the whole graph (the graph is returned unchanged,
    with a note) when an owner module is in training mode, or when grad mode is on
    and a candidate requires grad (freezing would drop its gradient).
    """
    candidates, owners = {}, {}
    for i, src in enumerate(ctx.input_sources):
        if not (isinstance(src, AttrSource) and src.where in (PARAM, BUFFER)):
            continue
        owner = getattr(ctx.objects.get(src.base().name()), "value", None)
        if src.name() in ctx.mutated or not isinstance(owner, torch.nn.Module):
            continue
        candidates[i] = (src, ctx.examples[src.name()])
        owners[src.base().name()] = (src.base(), owner)
    if not candidates:
        return Frozen(graph, _identity_plan(graph), [], ["freeze: no parameters or buffers"
                                                         " in this graph"])
    seen = {(g.kind, g.name) for g in guard_list}
    guards = []
    for base, owner in owners.values():
        src = AttrSource(base, "training")
        if (G.EQUALS_MATCH, src.name()) not in seen:
            guards.append(G.Guard(G.EQUALS_MATCH, src, owner.training))
    training = [base.name() for base, owner in owners.values() if owner.training]
    if training:
        return _refused(graph, guards, f"{training[0]} is in training mode (freezing is for"
                                       " inference: call .eval())")
    grad_mode = ctx.guards[(G.GRAD_MODE, None)].expected
    needs_grad = [src.name() for src, t in candidates.values() if t.requires_grad]
    if grad_mode and needs_grad:
        return _refused(graph, guards, f"grad mode is on and {needs_grad[0]} requires grad;"
                                       " freezing would drop its gradient (call under"
                                       " torch.no_grad(), or requires_grad_(False))")
    notes = []
    for i, (src, t) in list(candidates.items()):
        if t.is_inference():  # no version counter: an in-place change could not be seen
            notes.append(f"freeze: {src.name()} is an inference tensor; left unfrozen")
            del candidates[i]
    frozen_graph, plan, read, folded = freeze_graph(
        graph, {i: t for i, (_, t) in candidates.items()})
    for i in sorted(read):
        src, t = candidates[i]
        guards.append(G.Guard(G.TENSOR_VERSION, src, (id(t), t._version)))
        ctx.id_objects.append(t)  # held by the entry, so its id cannot be reused
    names = ", ".join(candidates[i][0].name() for i in sorted(read))
    notes.append(f"freeze: {len(read)} tensor(s) frozen ({names or 'none'}); "
                 f"{folded} batch norm(s) folded")
    return Frozen(frozen_graph, plan, guards, notes)


def _refused(graph: Graph, guards: list, why: str) -> Frozen:
    return Frozen(graph, _identity_plan(graph), guards, [f"freeze refused: {why}"])


def _identity_plan(graph: Graph) -> list:
    return [("in", i) for i in range(len(graph.inputs))]


def freeze_graph(graph: Graph, frozen: dict) -> tuple:
    """Evaluate what depends only on the `frozen` inputs (index -> tensor); fold batch norms.

    Returns (graph, plan, indices of the frozen inputs whose values were read,
    number of batch norms folded).  Graph inputs: the original inputs still used, in
    order, then one input per held tensor (named k0, k1...).  See Note [Frozen values
    stay tensors].
    """
    if not frozen:
        return graph, _identity_plan(graph), set(), 0
    inputs = {graph.inputs[i]: t for i, t in frozen.items()}
    index = {v: i for i, v in enumerate(graph.inputs)}
    limit = max(int(t.numel()) for t in inputs.values())
    derived, creations, evaluated = set(inputs), {}, []
    outputs = set(graph.outputs)
    for node in graph.nodes:
        if (node.op.category == CREATION and not node.inputs and node.body is None
                and len(node.outputs) == 1):
            creations[node.output] = node
        elif _evaluable(node, derived, creations, outputs, limit):
            evaluated.append(node)
            derived.add(node.output)
    done = {n.output for n in evaluated}
    kept = [n for n in graph.nodes if not (len(n.outputs) == 1 and n.output in done)]
    needed = [v for v in dict.fromkeys(x for n in kept for x in n.inputs) if v in done]
    read = {index[v] for n in evaluated for v in n.inputs if v in inputs}
    held = dict(zip(needed, _evaluate(graph.name, inputs, creations, evaluated, needed)))
    # Held values become inputs: new Values, so the caller's graph is left as it was.
    renamed = {v: Value(v.type, f"k{i}") for i, v in enumerate(needed)}
    kept = [_substituted(n, renamed) for n in kept]
    tensors = {renamed[v]: t for v, t in held.items()}
    b = GraphBuilder(graph.name)
    b.inputs = list(graph.inputs) + list(renamed.values())
    b.nodes, outputs, folded = _fold_batch_norms(kept, b, inputs, tensors, read, index,
                                                 graph.outputs)
    g = dce(b.build(outputs))
    used = {v for n in g.nodes for v in n.inputs} | set(g.outputs)
    final, plan = [], []
    for v in g.inputs:
        if v not in used:
            continue
        final.append(v)
        plan.append(("in", index[v]) if v in index else ("held", tensors[v]))
    return Graph(g.name, final, g.nodes, g.outputs), plan, read, folded


def _evaluable(node: Node, derived: set, creations: dict, outputs: set, limit: int) -> bool:
    """A pure node of frozen-derived operands, no larger than the largest parameter.

    Never an `expand` (a held tensor would repeat data the graph broadcasts for free)
    nor a graph output (the caller could write into a held tensor).
    """
    op = node.op
    if (op.category in (CREATION, RANDOM, FUSED) or has_effects(node) or op.name == "expand"
            or len(node.outputs) != 1 or node.output in outputs or not node.inputs):
        return False
    if not all(v in derived or v in creations for v in node.inputs):
        return False
    if not any(v in derived for v in node.inputs):
        return False
    t = node.output.type
    return t.is_static and int(t.numel()) <= limit


def _evaluate(name: str, inputs: dict, creations: dict, evaluated: list, needed: list):
    """The `needed` values, computed once by the eager backend on the real tensors."""
    if not needed:
        return []
    used = {v for n in evaluated for v in n.inputs}
    sub_inputs = [v for v in inputs if v in used]
    nodes = [creations[v] for v in creations if v in used] + evaluated
    sub = Graph(f"{name}_frozen", sub_inputs, nodes, needed)
    fn = get_backend("eager").compile_graph(sub, {})
    with torch.inference_mode(False), torch.no_grad():
        results = fn(*(inputs[v] for v in sub_inputs))
    return [r.contiguous() for r in results]


def _fold_batch_norms(nodes, b, inputs, tensors, read, index, outputs) -> tuple:
    """`batch_norm(conv2d|matmul(x, W) [+ b])` -> `conv2d|matmul(x, W') + b'` (held).

    The match and the algebra are `fold._match_batch_norm`'s, on arrays of the
    frozen and held tensors (converted only when the matcher asks for them).
    """
    arrays = _Arrays({**inputs, **tensors}, index)
    g = Graph(b.name, b.inputs, nodes, outputs)
    producers, uses = g.producers(), g.uses()
    for v in outputs:
        uses.setdefault(v, []).append(None)  # an output is a use the rewrite cannot see
    b.nodes, replace, folded = [], {}, 0
    for node in nodes:
        node = _substituted(node, replace)
        arrays.accessed = set()
        match = _match_batch_norm(node, arrays, producers, uses)
        if match is None:
            b.nodes.append(node)
            continue
        x, weight, bias, extern = match
        w_type = extern.inputs[1].type
        new_w = _held(b, tensors, weight, w_type)
        y = b.insert(extern.op, [x, new_w], extern.attrs)
        shape = [1, bias.shape[0]] + [1] * (y.type.rank - 2)
        new_b = _held(b, tensors, bias.reshape(shape), TensorType(y.type.dtype, tuple(shape),
                                                                  y.type.device))
        replace[node.output] = b.add(y, b.expand(new_b, shape=list(y.type.shape)))
        read.update(arrays.accessed)
        folded += 1
    return b.nodes, [replace.get(v, v) for v in outputs], folded


def _held(b: GraphBuilder, tensors: dict, array: np.ndarray, ttype: TensorType) -> Value:
    """A new held input of type `ttype` with the values of `array`."""
    value = Value(ttype, f"k{len(tensors)}")
    dtype = getattr(torch, ttype.dtype.torch_name)
    tensors[value] = torch.from_numpy(np.ascontiguousarray(array)).to(dtype=dtype,
                                                                       device=ttype.device)
    b.inputs.append(value)
    return value


class _Arrays:
    """Value -> numpy array of a frozen or held tensor, made on first access.

    `accessed`: the frozen inputs read (by index) since it was last reset.
    """

    def __init__(self, tensors: dict, index: dict):
        self.tensors, self.index, self.cache, self.accessed = tensors, index, {}, set()

    def __contains__(self, v) -> bool:
        return v in self.tensors

    def get(self, v, default=None) -> Optional[np.ndarray]:
        if v not in self.tensors:
            return default
        if v not in self.cache:
            t = self.tensors[v].detach()
            self.cache[v] = t.to("cpu", torch.float64).numpy()
        if v in self.index:
            self.accessed.add(self.index[v])
        return self.cache[v]

    def __getitem__(self, v) -> np.ndarray:
        array = self.get(v)
        if array is None:
            raise KeyError(v)
        return array


def _substituted(node: Node, replace: dict) -> Node:
    operands = [replace.get(v, v) for v in node.inputs]
    if operands == node.inputs:
        return node
    return Node(node.op, operands, node.attrs, node.outputs, node.body)
