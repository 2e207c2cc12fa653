"""explain(): what refcomp captured for one call, printed like torch._dynamo.explain.

Owns: `explain` and `ExplainOutput`.  It compiles into a private cache, so it neither reads
nor fills the global one.  Spec: spec/runtime.md, "explain() and fullgraph".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ir.printer import print_graph


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list = field(default_factory=list)  # dicts: id, reason, where, instruction
    ops_per_graph: list = field(default_factory=list)  # {op name: count} per graph
    guards: list = field(default_factory=list)  # readable guard descriptions
    compile_time_s: float = 0.0
    stage_times: dict = field(default_factory=dict)  # seconds per compile stage, summed
    notes: list = field(default_factory=list)
    # Per compiled forward + backward (spec/autograd.md): {"graph": index into graphs,
    # forward/backward ops and kernels, saved tensors and bytes, recomputed ops,
    # "backward": the backward graph's text}.
    training: list = field(default_factory=list)
    result: object = None  # what the call returned
    ir_graphs: list = field(default_factory=list, repr=False)  # the ir.Graph of each graph

    def to_dot(self, *, fused: bool = True) -> str:
        """The frame as a picture (Graphviz DOT): each graph a cluster, joined by its graph
        breaks; `fused=True` draws each graph as the backends get it (after the default
        pipeline, fusion and the memory plan), fused regions as clusters."""
        from ir.viz import graphs_to_dot

        graphs = self.ir_graphs
        if fused:
            from ir.passes.manager import run_pipeline
            from ir.passes.pipelines import KERNEL_VIEW_PIPELINE

            graphs = [run_pipeline(g, KERNEL_VIEW_PIPELINE) for g in graphs]
        breaks = [f"[{r['id']}] {r['reason']} at {r['where']}" for r in self.break_reasons]
        return graphs_to_dot(graphs, breaks, title="explain", show_plan=fused)

    def render(self, path, *, fused: bool = True):
        """Write the picture to `path` (.svg/.png/.pdf, or .dot text without Graphviz);
        returns the path written."""
        from ir.viz import render

        return render(self.to_dot(fused=fused), path)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {sum(sum(c.values()) for c in self.ops_per_graph)}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            for i, r in enumerate(self.break_reasons, 1):
                lines.append(f"  Break Reason {i}: [{r['id']}] {r['reason']}")
                lines.append(f"    at {r['where']} ({r['instruction']})")
        if self.ops_per_graph:
            lines.append("Ops per Graph:")
            for i, counts in enumerate(self.ops_per_graph, 1):
                ops = ", ".join(f"{k} x{v}" for k, v in counts.items())
                lines.append(f"  Graph {i}: {ops}")
        for t in self.training:
            kernels = t["backward_kernels"]
            lines.append(
                f"Training (Graph {t['graph'] + 1}): forward {t['forward_ops']} ops,"
                f" {t['forward_kernels']} kernels; backward {t['backward_ops']} ops, "
                + (f"{kernels} kernels" if kernels is not None else
                   "compiled on first backward")
                + f"; saves {t['saved_tensors']} tensors ({t['saved_bytes']} bytes),"
                f" recomputes {t['recomputed_ops']} ops")
        if self.notes:
            lines.append("Notes:")
            lines.extend(f"  {n}" for n in self.notes)
        stages = ", ".join(f"{name} {s * 1e3:.1f}" for name, s in self.stage_times.items()
                           if s >= 5e-5)
        lines.append(f"Compile Time: {self.compile_time_s * 1e3:.1f} ms"
                     + (f" ({stages} ms)" if stages else ""))
        lines.append(f"Guards ({len(self.guards)}):")
        lines.extend(f"  {g}" for g in self.guards)
        return "\n".join(lines)


def explain(fn, *args, backend=None, dynamic=None, **kwargs):
    """`explain(fn, *args)` -> ExplainOutput; `explain(fn)` -> a function taking the args
    (`explain(step)()` explains a function of no arguments)."""
    if not args and not kwargs:
        return lambda *a, **k: _explain(fn, a, k, backend, dynamic)
    return _explain(fn, args, kwargs, backend, dynamic)


def _explain(fn, args, kwargs, backend, dynamic):
    from codegen.backends import get_backend
    from refcomp.api import CompiledFunction, OptimizedModule, as_function
    from refcomp.config import resolve_options

    if backend is not None:  # None: chosen per graph by device, as in compile()
        get_backend(backend)
    options = resolve_options(None)
    if isinstance(fn, OptimizedModule):  # a compiled wrapper: explained with its options
        options = fn._compiled_forward.options
        fn = fn._orig_mod
    elif isinstance(fn, CompiledFunction):
        options = fn.options
        fn = fn.fn if fn.bound_self is None else fn.fn.__get__(fn.bound_self)
    if isinstance(fn, torch.nn.Module):
        compiled = OptimizedModule(fn, backend, False, options, private=True,
                                   dynamic=bool(dynamic))
        cf = None  # the CompiledFunction that served the call: known after it
    else:
        compiled = cf = CompiledFunction(as_function(fn), backend, False, options,
                                         private_cache=True,
                                         dynamic=bool(dynamic))
    result = compiled(*args, **kwargs)
    if cf is None:
        cf = compiled.__dict__.get("_served", compiled._compiled_forward)
    out = ExplainOutput(result=result)
    from refcomp.api import training_stats
    from refcomp.resume import counts_as_graph, located_entries

    listed = set()
    code = cf.code
    # the frame's entries, then its resume points' and its callees'
    for entry, frame_at in located_entries(cf.cache, f"{code.co_filename}:"
                                                      f"{code.co_firstlineno}"):
        out.compile_time_s += entry.compile_time_s
        for name, seconds in entry.stage_times.items():
            out.stage_times[name] = out.stage_times.get(name, 0.0) + seconds
        out.guards.extend(g.describe() for g in entry.guards.guards)
        out.notes.extend(entry.notes)
        if counts_as_graph(entry):
            out.graph_count += 1
            out.graphs.append(print_graph(entry.graph))
            out.ir_graphs.append(entry.graph)
            out.ops_per_graph.append(entry.graph.op_counts())
            if entry.training is not None:
                out.training.append({"graph": out.graph_count - 1,
                                     **training_stats(entry.training),
                                     "backward": print_graph(entry.training.backward_graph)})
        if entry.reason is not None:  # a whole-frame fallback, or a segment's break
            r = entry.reason
            text = f"{r.reason.title}: {r.detail}" if r.detail else r.reason.title
            # A reason raised outside any instruction (a result the graph cannot return)
            # is placed at its frame's line; one break seen from several frames (a break
            # inside nested wrappers stops each of them at the same line) is listed once.
            where = f"{r.filename}:{r.lineno}" if r.filename is not None and \
                r.lineno is not None else frame_at
            if (r.rid, text, where) in listed:
                continue
            listed.add((r.rid, text, where))
            out.graph_break_count += 1
            out.break_reasons.append({
                "id": r.rid, "reason": text, "where": where,
                "instruction": r.instruction or "<frame>", "hint": r.reason.hint})
    return out
