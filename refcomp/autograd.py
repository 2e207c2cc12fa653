"""Compiled training: a joint graph's two halves joined by one `torch.autograd.Function`.

Owns: `compile_joint` (a traced graph that needs gradients -> a callable whose outputs
carry a `grad_fn`), the `CompiledFunction` autograd node, and the per-entry record
that stats() and explain() read.  The joint graph and its partition are ir/autodiff.py;
this module only runs them.  Spec: spec/autograd.md.

The forward graph runs inside `Function.forward` (autograd records nothing in there),
returns the user outputs and the tensors the partition saves; those and the forward
inputs the backward reads go to `ctx.save_for_backward`, so autograd's checks apply as
in eager (a saved input modified in place before backward raises the eager error; a
second backward without retain_graph raises the eager error).  The backward graph is
compiled on the first backward call (Note [Lazy backward]) and run by
`Function.backward`.  With create_graph=True see Note [Double backward].

Note [Double backward]: with create_graph=True (grad mode on inside backward) the
gradients must themselves carry a graph back to the inputs; the compiled kernels record
none, and the saved intermediates were computed without autograd.  So that call runs the
same two IR graphs on the `eager` backend (one torch op per IR op, which autograd
records) from the forward's own input tensors: forward graph (for the intermediates),
then backward graph.  Gradients of any order then follow through torch's derivatives of
those ops.  The inputs are held weakly with their versions at forward time: an input
freed or modified in place since, or a graph that draws random numbers (a rerun would
redraw), raises a RuntimeError naming the problem; never a gradient that silently
misses a term.

Note [Unused gradients]: eager leaves an input's gradient None (`.grad` stays None,
`autograd.grad(..., allow_unused=True)` gives None) when nothing the loss reads depends on
it, e.g. `s = x1.sum().item()` beside a returned `x0 * 2` in one graph.  The Function's
outputs are one node to autograd, so it would call the backward with zeros for `s` and
get a zero gradient of x1 back.  So grads are not materialized: an output that got no
gradient gets zeros here, and an input's gradient is None unless some output that got a
gradient depends on it through floating values of the forward graph (`_grad_deps`:
eager's autograd graph, so `x.sign()` still gives x a zero gradient; corpus
grad_unused_input_is_none, grad_sign_zero_gradient).

Note [Lazy backward]: compiling the backward costs about as much as the forward, and
inference-only calls never need it; the first `backward()` compiles it (under a lock,
once per entry), and stats() counts it then.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from ir.autodiff import Joint
from ir.facts import touches_rng
from refcomp import global_state


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
    backward_calls: int = 0
    backward_graph: Any = None  # the backward graph: as derived, then as optimized
    forward_graph: Any = None


@dataclass
class _Info:
    forward: Callable
    make_backward: Callable[[], Callable]
    n_outputs: int
    n_inputs: int
    saved_inputs: list
    grad_outputs: list
    grad_inputs: list
    non_differentiable: list  # output indices autograd must not attach
    grad_deps: list  # per grad input: the positions in grad_outputs that depend on it
    record: TrainingRecord
    joint: Optional[Joint] = None
    backward: Optional[Callable] = None
    differentiable: Optional[tuple] = None  # (forward, backward) on the eager backend
    lock: threading.Lock = field(default_factory=threading.Lock)

    def backward_fn(self) -> Callable:
        if self.backward is None:
            with self.lock:
                if self.backward is None:
                    start = time.perf_counter()
                    fn = self.make_backward()
                    self.record.backward_compile_s = time.perf_counter() - start
                    self.backward = fn
        return self.backward


    def differentiable_fns(self) -> tuple:
        """Both graphs on the eager backend (Note [Double backward]), built once."""
        if self.differentiable is None:
            from codegen.backends import get_backend

            eager = get_backend("eager")
            with self.lock:
                if self.differentiable is None:
                    self.differentiable = (eager.compile_graph(self.joint.forward, {}),
                                           eager.compile_graph(self.joint.backward, {}))
        return self.differentiable


class CompiledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, info: _Info, *inputs):
        outs = info.forward(*inputs)
        n = info.n_outputs
        user, saved = list(outs[:n]), outs[n:]
        ctx.info = info
        # Note [Double backward]: held weakly, so memory is what save_for_backward keeps.
        ctx.inputs = [(weakref.ref(t), t._version) for t in inputs]
        ctx.save_for_backward(*[inputs[i] for i in info.saved_inputs], *saved)
        # Note [Unused gradients]
        ctx.set_materialize_grads(False)
        ctx.grad_shapes = [(user[i].shape, user[i].dtype, user[i].device)
                           for i in info.grad_outputs]
        if info.non_differentiable:
            ctx.mark_non_differentiable(*[user[i] for i in info.non_differentiable])
        return tuple(user)

    @staticmethod
    def backward(ctx, *grads):
        if torch.is_grad_enabled():  # create_graph=True: See Note [Double backward]
            return _differentiable_backward(ctx, *grads)
        return _backward(ctx, *grads)


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
    return out, present


def _backward(ctx, *grads):
    info = ctx.info
    grads_in, present = _grads_in(ctx, grads)
    if not present:
        return (None,) * (info.n_inputs + 1)
    fn = info.backward_fn()
    info.record.backward_calls += 1
    args = list(ctx.saved_tensors) + grads_in
    with global_state.autocast_off():  # its casts are IR nodes (Note [Autocast policy])
        return _input_grads(info, fn(*args), present)


def _differentiable_backward(ctx, *grads):
    """Gradients that carry a graph (create_graph=True); See Note [Double backward]."""
    info = ctx.info
    _ = ctx.saved_tensors  # autograd's own checks first (freed by an earlier backward)
    why = "double backward (create_graph=True) through a compiled graph"
    if info.joint is None or any(touches_rng(n) for n in info.joint.forward.nodes):
        raise RuntimeError(f"refcomp: {why} that draws random numbers is not supported"
                           " (recomputing it would redraw them); run this function eagerly"
                           " (refcomp.disable) or call backward without create_graph")
    inputs = []
    for k, (ref, version) in enumerate(ctx.inputs):
        t = ref()
        if t is None or t._version != version:
            what = "was freed" if t is None else "was modified in place"
            raise RuntimeError(f"refcomp: {why} recomputes the graph from its inputs, and"
                               f" input {k} {what} after the forward; keep it alive and"
                               " unchanged until backward, or run this function eagerly")
        inputs.append(t)
    grads_in, present = _grads_in(ctx, grads)
    if not present:
        return (None,) * (info.n_inputs + 1)
    forward, backward = info.differentiable_fns()
    with global_state.autocast_off():  # the IR graphs hold their own casts
        saved = forward(*inputs)[info.n_outputs:]
        args = [inputs[i] for i in info.saved_inputs] + list(saved) + grads_in
        return _input_grads(info, backward(*args), present)


def _input_grads(info: _Info, results, present) -> tuple:
    out: list = [None] * info.n_inputs
    for i, g, deps in zip(info.grad_inputs, results, info.grad_deps):
        if deps & present:
            out[i] = g
    return (None, *out)


def _grad_deps(j: Joint) -> list:
    """Per gradient the backward returns (of j.grad_inputs[k]): the positions in
    j.grad_outputs of the outputs that depend on that input through floating values of
    the forward graph (eager's autograd graph: an op on a floating value that requires
    grad records a node, even one whose derivative is zero, like `sign`; comparisons,
    argmax and integer results record none).  Note [Unused gradients]."""
    fw = j.forward
    reach = {v: frozenset([i]) for i, v in enumerate(fw.inputs) if v.type.dtype.is_float}
    for node in fw.nodes:
        d = frozenset().union(*(reach.get(v, frozenset()) for v in node.inputs))
        if node.body is not None:  # a body may read any input
            d = frozenset(i for i, v in enumerate(fw.inputs) if v.type.dtype.is_float)
        for o in node.outputs:
            if d and o.type.dtype.is_float:
                reach[o] = d
    by_input: dict = {}
    for k, i in enumerate(j.grad_outputs):
        for inp in reach.get(fw.outputs[i], frozenset()):
            by_input.setdefault(inp, set()).add(k)
    return [frozenset(by_input.get(i, ())) for i in j.grad_inputs]


def compile_joint(j: Joint, compile_forward: Callable, compile_backward: Callable,
                  differentiable_outputs, record: TrainingRecord) -> Callable:
    """The entry's function: `fn(*inputs) -> list of outputs` through CompiledFunction.

    compile_forward(graph) / compile_backward(graph) run the pipeline and the backend;
    the backward one is called on first use.  differentiable_outputs: per original
    output, whether eager would attach it to autograd."""
    forward = compile_forward(j.forward)
    info = _Info(forward=forward, make_backward=lambda: compile_backward(j.backward),
                 n_outputs=j.n_outputs, n_inputs=len(j.forward.inputs),
                 saved_inputs=list(j.saved_inputs), grad_outputs=list(j.grad_outputs),
                 grad_inputs=list(j.grad_inputs),
                 non_differentiable=[i for i, d in enumerate(differentiable_outputs)
                                     if not d or i not in j.grad_outputs],
                 grad_deps=_grad_deps(j), record=record, joint=j)
    apply = CompiledFunction.apply

    def run(*inputs):
        return apply(info, *inputs)
    run.info = info
    return run
