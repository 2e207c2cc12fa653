"""Compiled training: a joint graph's two halves joined by one `torch.autograd.Function`.

Owns: `compile_joint` (a traced graph that needs gradients -> a callable whose outputs
carry a `grad_fn`), the `CompiledFunction` autograd node, and the per-entry record
that stats() and explain() read.  The joint graph and its partition are ir/autodiff.py;
this module only runs them.  Spec: spec/autograd.md, "The runtime", which holds the Notes
cited here (Note [Lazy backward], Note [Double backward], Note [Unused gradients], Note
[Inputs no gradient reaches], Note [One node per dependency set], Note [Saved versions]).
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ir.autodiff import Joint, backward_for, differentiable_values, eager_saved_each
from ir.facts import touches_rng
from refcomp import global_state


def _pack(t):
    # A detached alias shares t's version counter; t itself (an output of the Function)
    # would hold its grad_fn and so a reference cycle.  Note [Saved versions].
    return t.detach()


def _unpack(t):
    return t


_HOOKS = (_pack, _unpack)


@dataclass
class TrainingRecord:
    """What stats() and explain() report about one compiled joint graph."""

    forward_ops: int
    backward_ops: int
    saved: int
    saved_bytes: int
    recomputed: int
    forward_kernels: int = 0
    backward_kernels: Optional[int] = None  # None until the backward is compiled
    backward_compile_s: float = 0.0
    backward_stage_times: dict = field(default_factory=dict)  # codegen.stats.STAGES
    backward_calls: int = 0
    backward_graph: Any = None  # the backward graph: as derived, then as optimized
    forward_graph: Any = None


@dataclass
class _Info:
    forward: Callable
    make_backward: Callable[[Any, bool], Callable]  # (graph, the all-gradients one?)
    n_outputs: int
    n_inputs: int
    saved_inputs: list
    sizes_only: frozenset  # of saved_inputs, those the backward reads for their sizes only
    grad_outputs: list
    grad_inputs: list
    non_differentiable: list  # output indices autograd must not attach
    grad_deps: dict  # per grad input: the positions in grad_outputs that depend on it
    record: TrainingRecord
    joint: Optional[Joint] = None
    # Per set of given gradients (Note [Given gradients], spec/autograd.md): the backward
    # graph, the inputs it returns gradients of, the saved positions it reads.
    graphs: dict = field(default_factory=dict)
    backwards: dict = field(default_factory=dict)  # compiled, per set
    differentiable: dict = field(default_factory=dict)  # on the eager backend, per set
    lock: threading.Lock = field(default_factory=threading.Lock)

    def backward_graph(self, given: frozenset) -> tuple:
        """(graph, grad inputs, the positions of ctx.saved_tensors it reads)."""
        found = self.graphs.get(given)
        if found is None:
            j = self.joint
            graph, grad_inputs = backward_for(j, given)
            n = len(self.saved_inputs) + j.n_saved
            used = {v for node in graph.nodes for v in node.inputs} | set(graph.outputs)
            read = frozenset(k for k, v in enumerate(graph.inputs[:n]) if v in used)
            found = (graph, grad_inputs, read)
            self.graphs[given] = found
        return found

    def backward_fn(self, given: frozenset) -> Callable:
        """The compiled backward for these given gradients, built once each."""
        fn = self.backwards.get(given)
        if fn is None:
            with self.lock:
                fn = self.backwards.get(given)
                if fn is None:
                    start = time.perf_counter()
                    graph = self.backward_graph(given)[0]
                    primary = graph is self.joint.backward
                    fn = self.make_backward(graph, primary)
                    if primary:
                        self.record.backward_compile_s = time.perf_counter() - start
                    self.backwards[given] = fn
        return fn

    def differentiable_fns(self, given: frozenset) -> tuple:
        """Both graphs on the eager backend (Note [Double backward]), built once."""
        found = self.differentiable.get(given)
        if found is None:
            from codegen.backends import get_backend

            eager = get_backend("eager")
            with self.lock:
                found = self.differentiable.get(given)
                if found is None:
                    found = (eager.compile_graph(self.joint.forward, {}),
                             eager.compile_graph(self.backward_graph(given)[0], {}))
                    self.differentiable[given] = found
        return found


_NON_TENSOR_ARGS = 4  # CompiledFunction.forward's info, callers, part, outs


class CompiledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, info: _Info, callers: tuple, part: tuple, outs: list, *inputs):
        # `part`, `outs`: None, or the outputs this node returns and the forward's results,
        # run once for all the nodes of a call (Note [One node per dependency set]).
        if outs is None:
            outs = _unviewed(info.forward(*inputs), inputs)
        n = info.n_outputs
        user, saved = list(outs[:n]), outs[n:]
        ctx.info = info
        ctx.part = part
        # Note [Double backward]: held weakly, so memory is what save_for_backward keeps.
        # `callers`: the caller's tensors where `inputs` holds a detached alias (Note
        # [Inputs no gradient reaches]); the recompute needs the caller's, alive.
        ctx.inputs = [(weakref.ref(t), _version(t)) for t in callers or inputs]
        # Note [Recomputed sizes] (spec/autograd.md): an input the backward reads for its
        # sizes only is no saved tensor, so changing it in place raises nothing, as in
        # eager; the backward gets the tensor itself (its sizes are what it reads).
        ctx.sizes_inputs = {k: inputs[i].detach() for k, i in enumerate(info.saved_inputs)
                            if i in info.sizes_only}
        to_save = [*[None if i in info.sizes_only else inputs[i] for i in info.saved_inputs],
                   *saved]
        ctx.save_for_backward(*to_save)
        # Note [Saved versions]: None where autograd checks every saved tensor itself.
        ctx.versions = None
        if len(info.grad_outputs) > 1 and \
                torch._C._autograd._top_saved_tensors_default_hooks(False) == _HOOKS:
            ctx.versions = [None if t is None else _version(t) for t in to_save]
        # Note [Unused gradients]
        ctx.set_materialize_grads(False)
        ctx.grad_shapes = [(user[i].shape, user[i].dtype, user[i].device)
                           for i in info.grad_outputs]
        mine = range(n) if part is None else part
        off = [user[i] for i in info.non_differentiable if i in mine]
        if off:
            ctx.mark_non_differentiable(*off)
        return tuple(user[i] for i in mine)

    @staticmethod
    def backward(ctx, *grads):
        if ctx.part is not None:  # the gradients of all outputs, None for other nodes'
            given = [None] * ctx.info.n_outputs
            for i, g in zip(ctx.part, grads):
                given[i] = g
            grads = given
        if torch.is_grad_enabled():  # create_graph=True: See Note [Double backward]
            return _differentiable_backward(ctx, *grads)
        return _backward(ctx, *grads)


def _unviewed(outs, inputs) -> list:
    """Note [Views of the Function's buffers]: `outs` with each view of a tensor the
    forward made (not of an input) replaced by its detached alias, one per object."""
    if not any(isinstance(t, torch.Tensor) and t._is_view() for t in outs):
        return outs
    ins = [t for t in inputs if isinstance(t, torch.Tensor)]
    theirs = {t.untyped_storage().data_ptr() for t in ins} - {0}
    bases = {id(b) for t in ins for b in (t, t._base) if b is not None}
    swapped: dict = {}
    result = []
    for t in outs:
        # (an empty storage's address is 0 whoever made it: corpus
        # grad_empty_view_of_output_written_at_break_llvm; its base says whose it is)
        if isinstance(t, torch.Tensor) and t._is_view() and (
                t.untyped_storage().data_ptr() not in theirs if t.untyped_storage().data_ptr()
                else id(t._base) not in bases):
            t = swapped.setdefault(id(t), t.detach())
        result.append(t)
    return result


def _grads_in(ctx, grads):
    """The backward's gradient arguments (zeros for an output that got none) and the
    positions in grad_outputs that got one (Note [Unused gradients])."""
    out, present = [], set()
    for k, (i, (shape, dtype, device)) in enumerate(zip(ctx.info.grad_outputs,
                                                        ctx.grad_shapes)):
        g = grads[i]
        if g is None:
            g = torch.zeros(shape, dtype=dtype, device=device)
        else:
            present.add(k)
        out.append(g)
    return out, frozenset(present)


def _saved_tensors(ctx, read) -> list:
    """ctx.saved_tensors, with eager's version check of the positions `read` where
    autograd does not check them itself (Note [Saved versions])."""
    saved = list(ctx.saved_tensors)
    if ctx.versions is not None:
        for k in sorted(read):
            if saved[k] is not None and ctx.versions[k] is not None and \
                    saved[k]._version != ctx.versions[k]:
                raise _modified(saved[k], ctx.versions[k])
    for k, t in ctx.sizes_inputs.items():
        saved[k] = t
    return saved


def _modified(t, version) -> RuntimeError:
    """Eager's error for a saved tensor modified in place since it was saved."""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an"
        f" inplace operation: [{t.type()} {list(t.shape)}], is at version {t._version};"
        f" expected version {version} instead. (refcomp: a tensor eager's backward"
        " saves, or a compiled backward reads)")


def _backward(ctx, *grads):
    info = ctx.info
    grads_in, present = _grads_in(ctx, grads)
    if not present:
        return (None,) * (info.n_inputs + _NON_TENSOR_ARGS)
    _, grad_inputs, read = info.backward_graph(present)
    fn = info.backward_fn(present)
    info.record.backward_calls += 1
    args = _saved_tensors(ctx, read) + grads_in
    with global_state.autocast_off():  # its casts are IR nodes (Note [Autocast policy])
        return _input_grads(info, grad_inputs, fn(*args), present)


def _differentiable_backward(ctx, *grads):
    """Gradients that carry a graph (create_graph=True); See Note [Double backward]."""
    info = ctx.info
    grads_in, present = _grads_in(ctx, grads)
    if not present:
        return (None,) * (info.n_inputs + _NON_TENSOR_ARGS)
    _, grad_inputs, read = info.backward_graph(present)
    _saved_tensors(ctx, read)  # the version checks first (freed by an earlier backward)
    why = "double backward (create_graph=True) through a compiled graph"
    if info.joint is None or any(touches_rng(n) for n in info.joint.forward.nodes):
        raise RuntimeError(f"refcomp: {why} that draws random numbers is not supported"
                           " (recomputing it would redraw them); run this function eagerly"
                           " (refcomp.disable) or call backward without create_graph")
    inputs = []
    for k, (ref, version) in enumerate(ctx.inputs):
        t = ref()
        if t is None or version is not None and t._version != version:
            what = "was freed" if t is None else "was modified in place"
            raise RuntimeError(f"refcomp: {why} recomputes the graph from its inputs, and"
                               f" input {k} {what} after the forward; keep it alive and"
                               " unchanged until backward, or run this function eagerly")
        inputs.append(t)
    forward, backward = info.differentiable_fns(present)
    with global_state.autocast_off():  # the IR graphs hold their own casts
        saved = forward(*inputs)[info.n_outputs:]
        args = [inputs[i] for i in info.saved_inputs] + list(saved) + grads_in
        return _input_grads(info, grad_inputs, backward(*args), present)


def _input_grads(info: _Info, grad_inputs, results, present) -> tuple:
    """autograd's gradients: the backward's results (of the inputs `grad_inputs`), None
    for an input no output that got a gradient depends on (Note [Unused gradients])."""
    out: list = [None] * info.n_inputs
    for i, g in zip(grad_inputs, results):
        if info.grad_deps[i] & present:
            out[i] = g
    return (*(None,) * _NON_TENSOR_ARGS, *out)


def _grad_deps(j: Joint) -> dict:
    """Per input j.backward returns a gradient of (j.grad_inputs): the positions in
    j.grad_outputs of the outputs that depend on that input through floating values of
    the forward graph (eager's autograd graph: an op on a floating value that requires
    grad records a node, even one whose derivative is zero, like `sign`; comparisons,
    argmax and integer results record none).  Note [Unused gradients]."""
    fw = j.forward
    reach = {v: frozenset([i]) for i, v in enumerate(fw.inputs) if v.type.dtype.is_inexact}
    for node in fw.nodes:
        d = frozenset().union(*(reach.get(v, frozenset()) for v in node.inputs))
        if node.body is not None:  # a body may read any input
            d = frozenset(i for i, v in enumerate(fw.inputs) if v.type.dtype.is_inexact)
        for o in node.outputs:
            if d and o.type.dtype.is_inexact:
                reach[o] = d
    by_input: dict = {}
    for k, i in enumerate(j.grad_outputs):
        for inp in reach.get(fw.outputs[i], frozenset()):
            by_input.setdefault(inp, set()).add(k)
    return {i: frozenset(by_input.get(i, ())) for i in j.grad_inputs}


def compile_joint(j: Joint, compile_forward: Callable, compile_backward: Callable,
                  differentiable_outputs, record: TrainingRecord) -> Callable:
    """The entry's function: `fn(*inputs) -> list of outputs` through CompiledFunction.

    compile_forward(graph) / compile_backward(graph, primary) run the pipeline and the
    backend; the backward one is called on first use of each set of given gradients
    (primary: the backward of all of them, the one stats() reports).
    differentiable_outputs: per original output, whether eager would attach it to
    autograd."""
    forward = compile_forward(j.forward)
    info = _Info(forward=forward, make_backward=compile_backward,
                 n_outputs=j.n_outputs, n_inputs=len(j.forward.inputs),
                 saved_inputs=list(j.saved_inputs), sizes_only=frozenset(j.sizes_only),
                 grad_outputs=list(j.grad_outputs),
                 grad_inputs=list(j.grad_inputs),
                 non_differentiable=[i for i, d in enumerate(differentiable_outputs)
                                     if not d or i not in j.grad_outputs],
                 grad_deps=_grad_deps(j), record=record, joint=j)
    # Note [Inputs no gradient reaches], Note [One node per dependency set]
    reached = sorted(i for i, deps in info.grad_deps.items() if deps)
    deps_of = [frozenset(i for i in reached if k in info.grad_deps[i])
               for k in range(len(info.grad_outputs))]
    apply_fn = CompiledFunction.apply

    def cut(inputs, keep):
        """(the caller's inputs or None, the inputs with those not in `keep` detached)."""
        if not any(isinstance(t, torch.Tensor) and t.requires_grad and i not in keep
                   for i, t in enumerate(inputs)):
            return None, inputs
        return inputs, [t.detach() if isinstance(t, torch.Tensor) and i not in keep else t
                        for i, t in enumerate(inputs)]

    def apply(*inputs):
        parts = _parts(info, deps_of, [i for i in reached if inputs[i].grad_fn is not None])
        if parts is None:
            callers, args = cut(inputs, reached)
            return apply_fn(info, callers, None, None, *args)
        # On detached aliases: an output that is an input must not be the caller's
        # tensor, or the node returning it would take over that tensor's grad_fn.
        plain = [t.detach() if isinstance(t, torch.Tensor) else t for t in inputs]
        with torch.no_grad():
            outs = _unviewed(info.forward(*plain), plain)
        results = [None] * info.n_outputs
        for part, keep in parts:
            callers, args = cut(inputs, keep)
            for i, t in zip(part, apply_fn(info, callers, part, outs, *args)):
                results[i] = t
        return tuple(results)

    if len(info.grad_outputs) < 2:
        run = apply
    else:
        def run(*inputs):  # Note [Saved versions]
            hooks = torch._C._autograd
            if not hooks._saved_tensors_hooks_is_enabled() or \
                    hooks._top_saved_tensors_default_hooks(False) is not None:
                return apply(*inputs)
            hooks._push_saved_tensors_default_hooks(*_HOOKS)
            try:
                return apply(*inputs)
            finally:
                hooks._pop_saved_tensors_default_hooks()
    run.info = info
    return run


def _parts(info: _Info, deps_of: list, non_leaves: list):
    """Note [One node per dependency set]: None where one node serves (every output that
    gets a gradient depends on the same non-leaf inputs), else per node (the user output
    positions it returns, the inputs it keeps edges to)."""
    if not non_leaves:
        return None
    nl = frozenset(non_leaves)
    groups: dict = {}
    for k, deps in enumerate(deps_of):
        groups.setdefault(deps & nl, []).append(k)
    if len(groups) < 2:
        return None
    parts = []
    rest = [i for i in range(info.n_outputs) if i not in info.grad_outputs]
    for ks in groups.values():
        positions = sorted({info.grad_outputs[k] for k in ks}.union(rest))
        rest = []  # the outputs without a gradient go with the first node
        parts.append((tuple(positions), frozenset().union(*(deps_of[k] for k in ks))))
    return parts


def eager_version_plan(graph, wants_grad, written=None, unsure=frozenset(),
                       extra=None, grad_written=frozenset()) -> dict:
    """Per output of `graph` that requires grad, the (input indices, output indices) of
    the graph inputs and outputs that eager's autograd nodes on its path save (Note
    [Saved by eager], ir/ops/registry.py); outputs with none are left out.  `written`:
    output index -> the input it is copied into after the call (an input mutated in the
    graph: the caller sees that input); `unsure`: outputs left out (they may be a clone,
    not the tensor eager's op made); `extra`: TraceContext.eager_saves; `grad_written`:
    inputs written in place under grad, whose old value eager's in-place op saves as a
    clone (Note [In-place on a graph input under grad])."""
    written = written or {}
    diff = differentiable_values(graph, wants_grad)
    plan = {}
    wanted = [k for k, v in enumerate(graph.outputs) if v in diff]
    for k, vals in eager_saved_each(graph, diff, wanted, extra).items():
        ins = {i for i, u in enumerate(graph.inputs) if u in vals and i not in grad_written}
        outs = {o for o, u in enumerate(graph.outputs) if u in vals}
        ins |= {written[o] for o in outs if o in written}
        outs = {o for o in outs if o not in written and o not in unsure}
        if ins or outs:
            plan[k] = (tuple(sorted(ins)), tuple(sorted(outs)))
    return plan


def check_versions_at_backward(plan: dict, inputs, outs) -> None:
    """Note [Saved by eager]: eager checks a saved tensor's version when the node that
    saved it runs, and it runs when the gradient of an output on its path arrives.  So
    for each output in `plan` (eager_version_plan; `inputs` and `outs`: the tensors the
    caller passed and gets), a pre-hook on its grad_fn checks the versions, taken now, of
    what eager saved on its path, when that output's gradient reaches it."""
    for k, (ins, saved_outs) in plan.items():
        out = outs[k]
        node = getattr(out, "grad_fn", None)
        if node is None:
            continue
        # A detached alias shares the version counter and keeps the tensor alive, as
        # eager's saved variable does (a tensor modified, then dropped, still raises).
        tracked = [(t.detach(), t._version)
                   for t in [inputs[i] for i in ins] + [outs[o] for o in saved_outs]
                   if isinstance(t, torch.Tensor) and not t.is_inference()]
        node.register_prehook(_version_hook(out.output_nr, tracked))


def _version(t):
    """`t._version`, or None for an inference tensor, which has no version counter (reading
    it raises: a tensor made under `torch.inference_mode()` and used by a graph that
    requires grad, corpus pyworld_inference_tensor_in_grad_graph).  Outside inference
    mode such a tensor cannot be changed in place, and eager saves none for backward."""
    return None if t.is_inference() else t._version


def _version_hook(nr, tracked):
    def check(grad_outputs):
        if grad_outputs[nr] is None:  # another output of the node got the gradient
            return
        for t, version in tracked:
            if t._version != version:
                raise _modified(t, version)
    return check
