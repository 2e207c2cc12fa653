"""The "triton" backend: a graph -> fused regions -> Kernels -> Triton kernels -> a callable.

Owns: `compile_graph(graph, options)` (the Backend contract of codegen/backends.py),
`TritonGraph` (the compiled callable: kernels, externs, views and fallbacks in
order) and the registration.  Must not know: the frontend.  Spec:
spec/codegen.md, "Triton".

Pipeline (as the "llvm" backend's): composite ops are decomposed and
pointwise/reduction nodes fused unless the graph already has regions;
`plan_memory` gives intermediates their arena offsets (option `plan`, default
on); `codegen.runtime.plan_graph` plans each top-level node as a kernel, an extern
(matmul, conv: PyTorch, so cuBLAS/cuDNN on a GPU), a view or a counted torch
fallback; every kernel goes through codegen/triton/launch.py.  A kernel Triton
source is not emitted for falls back to torch too, counted.

Memory: as in the llvm runtime (Note [Arena at run time], Note [Arena reuse] in
codegen/runtime.py), the kernel outputs and matmul results (`out=`) that
`codegen.runtime.Arena` places in the arena are typed views of one uint8 tensor
per thread and device (CUDA: and stream), made on the first call and reused;
outputs are fresh.  Triton kernels never write in place (emit.py refuses
`Kernel.inplace`: Note [Reuse across stages] assumes no store changes what a
later load of an input sees), so a `reuses` pair is kept apart: the result gets
bytes of its own past the plan's end (`Arena.separate_reuses`).

Devices: on a machine with CUDA, kernels compile for the GPU and the graph's
tensors must be CUDA tensors.  Without CUDA (or with `TRITON_INTERPRET=1`) the
same kernels run in Triton's interpreter on CPU tensors (Note [Interpreter
mode] in codegen/triton/__init__.py).  Outputs and the arena are allocated on
the device of the first input.  Symbolic graphs are specialized per binding of
their size symbols, on the first call with it (Kernels have concrete sizes).
"""

from __future__ import annotations

import math
import threading
import time

import torch

from codegen import stats
from codegen.backends import Backend, register_backend
from codegen.runtime import Arena, ThreadArena, concrete_shape, plan_graph, prepare
from codegen.torch_bridge import torch_dtype
from ir.graph import Graph
from ir.types import is_symbolic

OPTIONS = ("fuse", "max_rblock", "plan")


def _fresh(shape, dtype, device) -> torch.Tensor:
    """A value's own new tensor (every allocation of a call goes through here)."""
    return torch.empty(shape, dtype=dtype, device=device)


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
        # After fallbacks are known: a fallback's inputs and outputs stay out of the arena.
        self.arena = Arena(graph, sizes, self.units)
        self.arena.separate_reuses()
        slot = {v: i for i, v in enumerate(self.arena.offset)}
        self.view_specs = [(off, _nbytes(v, sizes), torch_dtype(v.type.dtype),
                            torch.Size(concrete_shape(v, sizes)))
                           for v, off in self.arena.offset.items()]
        # Per unit: where each output goes, an arena view's index or None (fresh).
        self.placement = [[slot.get(v) for v in u.outputs] for u in self.units]
        self._thread_arenas: dict = {}  # device (CUDA: device and stream) -> ThreadArena
        self._lock = threading.Lock()
        stats.STATS.graphs_compiled += 1
        stats.STATS.compile_seconds += time.perf_counter() - started

    def arena_views(self, device) -> tuple:
        """The typed views of the arena values on `device`, for the calling thread.

        One arena per thread (Note [Arena reuse]) and device, and on CUDA per stream
        too: a call's kernels are queued, not finished, when it returns, so a call on
        another stream could otherwise overwrite bytes the first still reads."""
        key = device
        if device.type == "cuda":
            key = (device, torch.cuda.current_stream(device).cuda_stream)
        arena = self._thread_arenas.get(key)
        if arena is None:
            with self._lock:
                arena = self._thread_arenas.setdefault(
                    key, ThreadArena(self.arena.nbytes, self.view_specs, device))
        return arena.get()[1]

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
        views = self.arena_views(device) if self.arena.offset else ()
        for unit, placed in zip(self.units, self.placement):
            args = [env[v] for v in unit.inputs]
            if unit.kind == "kernel":
                args = [a.contiguous() for a in args]
                outs = []
                for v, i in zip(unit.outputs, placed):
                    if i is None:
                        outs.append(_fresh(*self.output_types[v], device))
                    else:
                        outs.append(views[i])
                unit.fn(*args, *outs)
            elif placed and placed[0] is not None:  # matmul into its arena bytes
                stats.STATS.extern_calls += 1
                outs = [views[placed[0]]]
                unit.fn(*args, out=outs[0])
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


def _nbytes(v, sizes: dict) -> int:
    return math.prod(concrete_shape(v, sizes)) * v.type.dtype.itemsize


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
