"""The "triton" backend: a graph -> fused regions -> Kernels -> Triton kernels -> a callable.

Owns: `compile_graph(graph, options)` (the Backend contract of codegen/backends.py),
`TritonGraph` (the compiled callable: kernels, externs, views and fallbacks in
order) and the registration.  Must not know: the frontend.  Spec:
spec/codegen.md, "Triton".

Pipeline (as the "llvm" backend's): composite ops are decomposed and
pointwise/reduction nodes fused unless the graph already has regions;
`codegen.runtime.plan_graph` plans each top-level node as a kernel, an extern
(matmul, conv: PyTorch, so cuBLAS/cuDNN on a GPU), a view or a counted torch
fallback; every kernel goes through codegen/triton/launch.py.  A kernel Triton
source is not emitted for falls back to torch too, counted.

Devices: on a machine with CUDA, kernels compile for the GPU and the graph's
tensors must be CUDA tensors.  Without CUDA (or with `TRITON_INTERPRET=1`) the
same kernels run in Triton's interpreter on CPU tensors (Note [Interpreter
mode] in codegen/triton/__init__.py).  Outputs are allocated on the device of
the first input.  Symbolic graphs are specialized per binding of their size
symbols, on the first call with it (Kernels have concrete sizes).
"""

from __future__ import annotations

import time

import torch

from codegen import stats
from codegen.backends import Backend, register_backend
from codegen.runtime import concrete_shape, plan_graph
from codegen.torch_bridge import torch_dtype
from ir.graph import Graph
from ir.ops.registry import COMPOSITE, POINTWISE, REDUCTION
from ir.types import is_symbolic

OPTIONS = ("fuse", "max_rblock")


def prepare(graph: Graph, options: dict) -> Graph:
    """Decompose composites and fuse, unless the graph already holds regions."""
    from ir.passes.registry import get_pass

    ops = {n.op.category for n in graph.nodes}
    if COMPOSITE in ops:
        graph = get_pass("decompose")(graph)
        ops = {n.op.category for n in graph.nodes}
    if options.get("fuse", True) and ops & {POINTWISE, REDUCTION}:
        graph = get_pass("fuse")(graph)
    return graph


def _eager(body: Graph):
    from codegen import eager

    return eager.compile_graph(body, {})


class TritonGraph:
    """`graph` compiled for concrete `sizes`: call it with the input tensors."""

    def __init__(self, graph: Graph, sizes: dict, options: dict):
        from codegen.triton.emit import MAX_RBLOCK
        from codegen.triton.launch import compile_kernel

        started = time.perf_counter()
        max_rblock = int(options.get("max_rblock", MAX_RBLOCK))
        self.graph = graph
        self.units = plan_graph(graph, sizes)
        self.launchers = []
        for unit in self.units:
            if unit.kind != "kernel":
                continue
            try:
                launcher = compile_kernel(unit.kernel, max_rblock)
            except NotImplementedError as e:
                stats.STATS.fallback(unit.label, f"no Triton kernel: {e}")
                unit.kind, unit.fn = "eager", _eager(unit.fn)
                continue
            stats.STATS.kernels += 1
            unit.fn = launcher
            self.launchers.append(launcher)
        self.kernels = [u.kernel for u in self.units if u.kind == "kernel"]
        self.input_types = [(torch.Size(concrete_shape(v, sizes)), torch_dtype(v.type.dtype))
                            for v in graph.inputs]
        self.output_types = {v: (concrete_shape(v, sizes), torch_dtype(v.type.dtype))
                             for u in self.units for v in u.outputs}
        stats.STATS.graphs_compiled += 1
        stats.STATS.compile_seconds += time.perf_counter() - started

    @property
    def sources(self) -> list[str]:
        """The Triton module of each kernel, in launch order."""
        return [launcher.source for launcher in self.launchers]

    def __call__(self, *tensors) -> list:
        if len(tensors) != len(self.graph.inputs):
            raise TypeError(f"compiled graph takes {len(self.graph.inputs)} tensors,"
                            f" got {len(tensors)}")
        env = {}
        for i, (v, t) in enumerate(zip(self.graph.inputs, tensors)):
            shape, dtype = self.input_types[i]
            if t.shape != shape or t.dtype != dtype:
                raise TypeError(f"compiled graph input {i}: got {t.dtype}{list(t.shape)},"
                                " which is not what it was compiled for")
            env[v] = t
        device = tensors[0].device if tensors else _default_device()
        for unit in self.units:
            args = [env[v] for v in unit.inputs]
            if unit.kind == "kernel":
                args = [a.contiguous() for a in args]
                outs = []
                for v in unit.outputs:
                    shape, dtype = self.output_types[v]
                    outs.append(torch.empty(shape, dtype=dtype, device=device))
                unit.fn(*args, *outs)
            else:
                if unit.kind == "extern":
                    stats.STATS.extern_calls += 1
                elif unit.kind == "eager":
                    stats.STATS.fallback_calls += 1
                result = unit.fn(*args)
                single = unit.kind in ("extern", "view") and len(unit.outputs) == 1
                outs = [result] if single else list(result)
            env.update(zip(unit.outputs, outs))
        return [env[v] for v in self.graph.outputs]


def _default_device() -> torch.device:
    from codegen.triton import interpreting

    return torch.device("cpu" if interpreting() else "cuda")


def compile_graph(graph: Graph, options: dict):
    """`fn(*tensors) -> list[Tensor]`; see the module docstring."""
    from codegen.triton import interpreting, load_triton

    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ValueError(f"the triton backend has no option(s) {sorted(unknown)};"
                         f" valid: {', '.join(OPTIONS)}")
    load_triton()
    devices = {v.type.device for v in graph.inputs} | {
        n.attrs.get("device", "cpu") for n in graph.walk()}
    if not interpreting() and "cpu" in devices:
        raise ValueError("the triton backend found a CUDA device, so it compiles for the GPU,"
                         " and this graph has CPU tensors: move them to CUDA, or set"
                         " TRITON_INTERPRET=1 to run Triton's interpreter on the CPU")
    graph = prepare(graph, options)
    symbolic = [(s, i, d) for i, v in enumerate(graph.inputs)
                for d, s in enumerate(v.type.shape) if is_symbolic(s) and s.is_Symbol]
    if not symbolic:
        return _with_compiled(TritonGraph(graph, {}, options))
    return _specializing(graph, symbolic, options)


def _with_compiled(compiled: TritonGraph):
    def call(*tensors):
        return compiled(*tensors)

    call.compiled = compiled
    return call


def _specializing(graph: Graph, symbolic: list, options: dict):
    """Compile once per distinct binding of the size symbols (first call with those sizes)."""
    variants: dict = {}

    def call(*tensors):
        key = tuple(tensors[i].shape[d] for _, i, d in symbolic)
        compiled = variants.get(key)
        if compiled is None:
            sizes = {s: n for (s, _, _), n in zip(symbolic, key)}
            compiled = variants[key] = TritonGraph(graph, sizes, options)
        return compiled(*tensors)

    call.variants = variants
    return call


TRITON = register_backend(Backend(
    "triton", compile_graph, differentiable=False,
    doc="fused regions as Triton kernels: CUDA, or Triton's interpreter on the CPU;"
        " externs and fallbacks via torch",
))
