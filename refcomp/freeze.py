"""`options={"freeze": True}`: a module's parameters and buffers as compile-time values.

Owns: deciding whether one graph may be frozen (`freeze_entry`), the rewrite
(`freeze_graph`: constant subexpressions of parameters evaluated once, batch norms
folded into the conv/linear before them, convolutions and large linear layers run by
torch's prepacked-weight ops, Note [Prepacked weights]), the guards that keep it sound
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
from ir.ops.opaque import parse_layouts
from ir.ops.registry import CREATION, FUSED, RANDOM, lookup
from ir.passes.dce import dce
from ir.passes.fold import _match_batch_norm
from ir.types import TensorType, f32
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


def freeze_entry(ctx, graph: Graph, guard_list: list, backend: Optional[str] = None) -> Frozen:
    """Freeze the module state of `graph` (traced by `ctx`), or say why not.

    Candidates: inputs read from a module's `_parameters`/`_buffers` that the graph
    does not mutate.  Refused for the whole graph (the graph is returned unchanged,
    with a note) when an owner module is in training mode, or when grad mode is on
    and a candidate requires grad (freezing would drop its gradient).  `backend`: the
    one the graph will run on (None: the default), which decides whether prepacked
    weights may be used (Note [Prepacked weights]).
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
    # Note [Prepacked weights]: torch's prepacked-weight ops have no autograd formula,
    # and only backends that run `aten` nodes on the tensors themselves can pass an
    # opaque packed weight (the reference interpreter makes numpy arrays of operands).
    differentiated = grad_mode and any(
        ctx.examples[src.name()].requires_grad for i, src in enumerate(ctx.input_sources)
        if i not in candidates and isinstance(ctx.examples.get(src.name()), torch.Tensor))
    prepack = backend in PREPACK_BACKENDS and not differentiated
    channels_last = frozenset(
        i for i, src in enumerate(ctx.input_sources)
        if i not in candidates and _channels_last(ctx.examples.get(src.name())))
    frozen_graph, plan, read, folded = freeze_graph(
        graph, {i: t for i, (_, t) in candidates.items()}, prepack, channels_last)
    for i in sorted(read):
        src, t = candidates[i]
        guards.append(G.Guard(G.TENSOR_VERSION, src, (id(t), t._version)))
        ctx.id_objects.append(t)  # held by the entry, so its id cannot be reused
    names = ", ".join(candidates[i][0].name() for i in sorted(read))
    notes.append(f"freeze: {len(read)} tensor(s) frozen ({names or 'none'}); "
                 f"{folded[0]} batch norm(s) folded; {folded[1]} call(s) with prepacked"
                 " weights")
    return Frozen(frozen_graph, plan, guards, notes)


def _refused(graph: Graph, guards: list, why: str) -> Frozen:
    return Frozen(graph, _identity_plan(graph), guards, [f"freeze refused: {why}"])


def _identity_plan(graph: Graph) -> list:
    return [("in", i) for i in range(len(graph.inputs))]


# Backends that run an `aten` node by calling torch on the tensors (None: the default,
# llvm on CPU).
PREPACK_BACKENDS = frozenset({None, "", "llvm", "eager"})


def freeze_graph(graph: Graph, frozen: dict, prepack: bool = False,
                 channels_last: frozenset = frozenset()) -> tuple:
    """Evaluate what depends only on the `frozen` inputs (index -> tensor); fold batch norms;
    with `prepack`, run convolutions and linear layers with prepacked weights
    (`channels_last`: indices of the inputs that arrive in that memory format, Note
    [Channels-last convolutions]).

    Returns (graph, plan, indices of the frozen inputs whose values were read,
    (number of batch norms folded, number of prepacked-weight calls made)).  Graph
    inputs: the original inputs still used, in order, then one input per held tensor
    (named k0, k1...).  See Note [Frozen values stay tensors].
    """
    if not frozen:
        return graph, _identity_plan(graph), set(), (0, 0)
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
    fused = 0
    if prepack:
        b.nodes = dce(b.build(outputs)).nodes  # without the nodes folding left unused
        b.nodes, outputs, fused = _prepacked_calls(b, {**inputs, **tensors}, tensors, read,
                                                   index, outputs,
                                                   {graph.inputs[i] for i in channels_last})
    g = dce(b.build(outputs))
    if fused:
        g = Graph(g.name, g.inputs, _settle_channels_last(g.nodes), g.outputs)
    used = {v for n in g.nodes for v in n.inputs} | set(g.outputs)
    final, plan = [], []
    for v in g.inputs:
        if v not in used:
            continue
        final.append(v)
        plan.append(("in", index[v]) if v in index else ("held", tensors[v]))
    return Graph(g.name, final, g.nodes, g.outputs), plan, read, (folded, fused)


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


# Note [Prepacked weights]
# Under freeze, a convolution or a linear layer of frozen weights runs as one call of
# torch's own CPU ops for prepacked weights, as Inductor's freezing passes do (torch/
# _inductor/fx_passes/mkldnn_fusion.py), each chosen by measurement (1 thread,
# emeraldrapids; issue 38):
# - conv2d [+ bias] [-> relu|gelu]: `torch.ops.mkldnn._convolution_pointwise`, oneDNN's
#   convolution with the bias and the activation applied to each output block while it
#   is in registers: the output is written once instead of being written, read back by
#   a bias/activation kernel and written again (conv3x3 64->64 on [8,64,56,56] with a
#   folded batch norm and relu: 14.1 -> 13.4 ms).  The weight stays OIHW: one prepacked
#   by `_reorder_convolution_weight` makes oneDNN return channels_last, which eager
#   does not.
# - matmul(x, W) of a 2-d x (a Linear; x @ W of a rank-3 x is traced 2-d between
#   reshapes): `torch.ops.mkl._mkl_linear` with W packed once by
#   `_mkl_reorder_linear_weight` for x's row count, MKL's packed GEMM (Inductor's choice
#   for float32): 256x1024 @ 1024x4096 14.8 -> 13.1 ms.  Only for weights of at least
#   MKL_PACK_MIN elements: transformer2's 256x1024 and 1024x256 layers, as fast packed
#   as not when timed alone, made the whole model 4% slower packed (31.0 -> 32.5 ms),
#   its 256x256 ones no faster.  The bias and the activation
#   stay graph nodes, fused into the kernel after the call: oneDNN's linear with those
#   post-ops (`_linear_pointwise`, prepacked) measured slower than MKL's GEMM plus that
#   kernel (15.1 vs 13.7 ms), and slower than ATen's matmul on transformer2's shapes.
# The activations fused into the convolution give eager's result bit for bit on its
# output: relu, and GELU with approximate="none" (oneDNN's gelu_erf gives ATen's gelu
# bit for bit; tests/frontend/test_freeze.py).  GELU's tanh approximation differs from
# ATen's by a few ulps and stays a kernel.  The bias is added inside the convolution,
# as eager's F.conv2d(x, W, b) adds it, not always as the graph's conv2d + add rounds
# it (an ulp apart on [8,64,56,56] 3x3), and is handed over contiguous: this op reads a
# strided bias as if it were contiguous (torch 2.13).  The GEMMs
# themselves are oneDNN's and MKL's (ATen's conv2d on CPU is oneDNN's too): results
# differ from eager's by the GEMM's own rounding (the order of its sums), as torch's
# CPU GEMMs differ among themselves.
MKL_PACK_MIN = 1 << 20  # weight elements; See Note [Prepacked weights]
_ONEDNN_UNARY = {"relu": lambda node: "relu",
                 "gelu": lambda node: "gelu" if node.attrs.get("approximate", "none") == "none"
                 else None}


def _onednn_conv_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn,
                                                             "_convolution_pointwise")


def _mkl_linear_available() -> bool:
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


def _prepacked_calls(b: GraphBuilder, values: dict, tensors: dict, read: set, index: dict,
                     outputs: list, channels_last: set = frozenset()) -> tuple:
    """conv2d(x, W) [+ b] [-> relu|gelu] and matmul(x, W) of frozen W (and b) -> one call
    of torch's prepacked-weight op.  See Note [Prepacked weights].

    `values`: the frozen and held tensors by Value; `channels_last`: the Values that are
    channels_last tensors at run time (Note [Channels-last convolutions]).  Returns
    (nodes, outputs, number of calls made).
    """
    channels_last = set(channels_last)
    g = Graph(b.name, b.inputs, b.nodes, outputs)
    producers, uses = g.producers(), g.uses()
    for v in outputs:
        uses.setdefault(v, []).append(None)

    def only_use(v):
        users = uses.get(v, [])
        return users[0] if len(users) == 1 and users[0] is not None else None

    def f32_cpu(v):
        return v.type.dtype.short == "f32" and v.type.device == "cpu" and v.type.is_static

    nodes, replace, count = list(b.nodes), {}, 0
    aten = lookup("aten")
    for node in list(nodes):
        if node.op.name not in ("conv2d", "matmul") or len(node.inputs) != 2:
            continue
        x, w = node.inputs
        if not (w in values and f32_cpu(w) and f32_cpu(x) and x not in values):
            continue
        if node.op.name == "matmul":
            if not (_mkl_linear_available() and x.type.rank == 2 and w.type.rank == 2):
                continue
            rows = x.type.shape[0]
            if w.type.numel() < MKL_PACK_MIN:
                continue
            wt = values[w].detach().t().contiguous()
            packed = torch.ops.mkl._mkl_reorder_linear_weight(wt, rows)
            if w in index:
                read.add(index[w])
            operands = [replace.get(x, x),
                        _held(b, tensors, packed, _type_of(packed), numpy=False),
                        _held(b, tensors, wt, _type_of(wt), numpy=False)]
            new = Node(aten, operands, aten.normalize_attrs(
                {"fn": "torch.ops.mkl._mkl_linear.default",
                 "args": f"T[0], T[1], T[2], None, {rows}",
                 "results": str(node.output.type)}), [Value(node.output.type)])
            nodes[nodes.index(node)] = new
            replace[node.output] = new.output
            count += 1
            continue
        if not _onednn_conv_available():
            continue
        channels = w.type.shape[0]
        last, tail, bias, attr = node.output, node, None, "none"
        user = only_use(last)
        if user is not None and user.op.name == "add":
            other = [v for v in user.inputs if v is not last]
            bias = _bias_of(other[0] if len(other) == 1 else None, producers, values, channels)
            if bias is not None:
                last, tail = user.output, user
        user = only_use(last)
        if user is not None and user.op.name in _ONEDNN_UNARY:
            unary = _ONEDNN_UNARY[user.op.name](user)
            if unary is not None:
                last, tail, attr = user.output, user, unary
        if tail is node:
            continue  # no epilogue: ATen's conv2d is the same oneDNN call
        operands = [replace.get(x, x), w]
        if bias is not None:
            bias_value, bias_tensor = bias
            if bias_value in index:
                read.add(index[bias_value])
            operands.append(_held(b, tensors, bias_tensor, _type_of(bias_tensor), numpy=False))
        a = node.attrs
        args = (f"T[0], T[1], {'T[2]' if bias is not None else 'None'}, {list(a['padding'])},"
                f" {list(a['stride'])}, {list(a['dilation'])}, {a['groups']}, {attr!r}, [],"
                f" {'none' if attr == 'gelu' else None!r}")  # gelu's algorithm: erf
        attrs = {"fn": "torch.ops.mkldnn._convolution_pointwise.default", "args": args,
                 "results": str(last.type)}
        layouts = []  # Note [Channels-last convolutions]
        if operands[0] in channels_last and x.type.rank == 4:
            layouts.append((0, _channels_last_strides(x.type.shape)))
        if _channels_last(values[w]):  # a weight kept in that format: read where it lies
            layouts.append((1, tuple(values[w].stride())))
        if layouts:
            attrs["layouts"] = "; ".join(f"{i}:" + ",".join(map(str, st)) for i, st in layouts)
        new = Node(aten, operands, aten.normalize_attrs(attrs), [Value(last.type)])
        if layouts and layouts[0][0] == 0:
            channels_last.add(new.output)  # oneDNN answers in its input's memory format
        nodes[nodes.index(tail)] = new  # the chain's other nodes die (dce)
        replace[last] = new.output
        count += 1
    kept = [_substituted(n, replace) for n in nodes]
    return kept, [replace.get(v, v) for v in outputs], count


def _settle_channels_last(nodes: list) -> list:
    """Keep a convolution in channels_last only where its result goes to such convolutions
    or out of the graph: a kernel reads it row-major, which costs a transposing copy
    (torch's, ~2 ms on [8,64,56,56]) where oneDNN's own NCHW reorder costs ~1.  A
    convolution that loses it takes its successors' with it (their input is then
    row-major).  `nodes`: live ones only.  See Note [Channels-last convolutions]."""
    def input_layout(node):
        return parse_layouts(node.attrs.get("layouts") or "").get(0)

    convs = {n.output: n for n in nodes if n.op.name == "aten" and input_layout(n) is not None}
    users = {}
    for n in nodes:
        for j, v in enumerate(n.inputs):
            users.setdefault(v, []).append((n, j))
    kept = set(convs)
    changed = True
    while changed:
        changed = False
        for v in list(kept):
            node = convs[v]
            x = node.inputs[0]
            good_input = x not in convs or x in kept
            good_users = all(u.output in kept and j == 0 for u, j in users.get(v, []))
            if not (good_input and good_users):  # a graph output is a good user
                kept.discard(v)
                changed = True
    out = []
    for n in nodes:
        if n.op.name == "aten" and n.output in convs and n.output not in kept:
            laid = parse_layouts(n.attrs["layouts"])
            del laid[0]
            attrs = dict(n.attrs)
            attrs["layouts"] = "; ".join(f"{i}:" + ",".join(map(str, st))
                                         for i, st in sorted(laid.items()))
            n = Node(n.op, n.inputs, n.op.normalize_attrs(attrs), n.outputs, n.body)
        out.append(n)
    return out


# Note [Channels-last convolutions]
# A model run in channels_last (`model.to(memory_format=torch.channels_last)` and its
# input too: the usual CPU inference recipe) convolves in that format in eager: ATen's
# conv2d answers in its input's format, through oneDNN's NHWC convolution.  The `aten`
# runner lays every operand out row-major unless the node names its layout (Note
# [Operands in eager's layout], codegen/opaque.py), which here cost a copy of the input
# to NCHW, oneDNN's reorders around its blocked convolution, and a copy of the NCHW
# result back to eager's channels_last strides: [8,64,56,56] conv+BN+ReLU 19.8 ms
# against eager's 15.4.  So a convolution whose input arrives channels_last (an input
# of the graph that is channels_last-dense, or the result of such a call) names that
# layout for it, and its result, channels_last like eager's, needs no copy when it is
# returned; a kernel that reads it gets it row-major, as from any such call.
def _channels_last(t) -> bool:
    return (isinstance(t, torch.Tensor) and t.dim() == 4 and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last))


def _channels_last_strides(shape) -> tuple:
    n, c, h, w = (int(d) for d in shape)
    return (h * w * c, 1, w * c, c)


def _type_of(t: torch.Tensor) -> TensorType:
    return TensorType(f32, tuple(t.shape), t.device.type)


def _bias_of(v, producers, values, channels):
    """(frozen Value, tensor [channels]) when `v` is a per-output-channel bias of a conv
    ([1, C, 1, 1], or an expand of it), else None."""
    if v is None:
        return None
    if v not in values and v in producers and producers[v].op.name == "expand":
        v = producers[v].inputs[0]
    if v not in values:
        return None
    t = values[v]
    if (tuple(t.shape) not in ((1, channels, 1, 1), (channels, 1, 1))
            or t.dtype != torch.float32 or t.device.type != "cpu"):
        return None
    return v, t.detach().reshape(channels).contiguous()


def _held(b: GraphBuilder, tensors: dict, array, ttype: TensorType,
          numpy: bool = True) -> Value:
    """A new held input of type `ttype` with the values of `array` (a numpy array, or
    with numpy=False the tensor itself)."""
    value = Value(ttype, f"k{len(tensors)}")
    dtype = getattr(torch, ttype.dtype.torch_name)
    if not numpy:
        tensors[value] = array
    else:
        tensors[value] = torch.from_numpy(np.ascontiguousarray(array)).to(
            dtype=dtype, device=ttype.device)
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
