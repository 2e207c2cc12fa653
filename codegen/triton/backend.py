"""The "triton" backend: a graph -> fused regions -> Kernels -> Triton kernels -> a callable.

Owns: `compile_graph(graph, options)` (the Backend contract of codegen/backends.py),
`TritonGraph` (the compiled callable: kernels, externs, views and fallbacks in
order) and the registration.  Must not know: the frontend.  Spec:
spec/codegen.md, "Triton".

The pipeline, arena and devices are the "llvm" backend's (spec/codegen.md, "Triton"):
every kernel goes through codegen/triton/launch.py.  Triton kernels never write in place
(emit.py refuses `Kernel.inplace`: Note [Reuse across stages] assumes no store changes
what a later load of an input sees), so a `reuses` pair is kept apart: the result gets
bytes of its own past the plan's end (`Arena.separate_reuses`).
"""

from __future__ import annotations

import math
import threading
import time

import torch

from codegen import sizes as sz
from codegen import stats
from codegen.backends import Backend, register_backend
from codegen.runtime import Arena, GrowingArena, plan_graph, prepare, shape_of, symbol_bindings
from codegen.torch_bridge import torch_dtype
from ir.graph import Graph

OPTIONS = ("fuse", "max_rblock", "plan")


def _fresh(shape, dtype, device) -> torch.Tensor:
    """A value's own new tensor (every allocation of a call goes through here)."""
    return torch.empty(shape, dtype=dtype, device=device)


def _eager(body: Graph):
    from codegen import eager

    return eager.compile_graph(body, {})


class TritonGraph:
    """`graph` compiled once: call it with the input tensors.  A symbolic graph reads its
    size symbols from the inputs' shapes per call and passes them to its kernels
    (Note [Runtime sizes] in codegen/kernel.py)."""

    def __init__(self, graph: Graph, options: dict):
        from codegen.triton.emit import MAX_RBLOCK
        from codegen.triton.launch import compile_kernel

        started = time.perf_counter()
        max_rblock = int(options.get("max_rblock", MAX_RBLOCK))
        self.graph = graph
        self.bindings = symbol_bindings(graph)
        symbols = [s for s, _, _ in self.bindings]
        self.units = plan_graph(graph, symbols)
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
            unit.body = unit.fn
            unit.fn = launcher
            position = {p: symbols.index(p) for p in unit.kernel.params}
            unit.values = [position[p] for p in unit.kernel.params]  # into the call's sizes
            unit.numels = sz.evaluator([b.numel for b in unit.kernel.buffers], symbols)
            self.launchers.append(launcher)
        self.kernels = [u.kernel for u in self.units if u.kind == "kernel"]
        # Shapes (and the arena layout) as functions of the call's sizes.
        values = list(graph.inputs) + [v for u in self.units for v in u.outputs]
        self.shapes = {v: i for i, v in enumerate(values)}
        self.shape_fn = sz.evaluator([d for v in values for d in shape_of(v)], symbols)
        self.dims = [(sum(v.type.rank for v in values[:i]), v.type.rank)
                     for i, v in enumerate(values)]
        self.dtypes = {v: torch_dtype(v.type.dtype) for v in values}
        # After fallbacks are known: a fallback's inputs and outputs stay out of the arena.
        self.arena = Arena(graph, self.units)
        self.arena.separate_reuses()
        arena_values = list(self.arena.offset)
        slot = {v: i for i, v in enumerate(arena_values)}
        self.arena_fn = sz.evaluator([self.arena.nbytes] + [self.arena.offset[v] for v in
                                                           arena_values], symbols)
        self.arena_values = arena_values
        # Per unit: where each output goes, an arena view's index or None (fresh).
        self.placement = [[slot.get(v) for v in u.outputs] for u in self.units]
        self._thread_arenas: dict = {}  # device (CUDA: device and stream) -> GrowingArena
        self._lock = threading.Lock()
        self._local = threading.local()
        stats.STATS.graphs_compiled += 1
        stats.STATS.compile_seconds += time.perf_counter() - started

    def arena_bytes(self, device, nbytes: int) -> torch.Tensor:
        """The arena's uint8 tensor on `device` for the calling thread.

        One arena per thread (Note [Arena reuse]) and device, and on CUDA per stream
        too: a call's kernels are queued, not finished, when it returns, so a call on
        another stream could otherwise overwrite bytes the first still reads.  It grows
        when a call's sizes need more bytes."""
        key = _arena_key(device)
        arena = self._thread_arenas.get(key)
        if arena is None:
            with self._lock:
                arena = self._thread_arenas.setdefault(key, GrowingArena(device))
        return arena.get(nbytes)

    def _views(self, device, sizes, shape) -> list:
        nbytes, *offsets = self.arena_fn(*sizes)
        arena = self.arena_bytes(device, nbytes)
        views = []
        for v, off in zip(self.arena_values, offsets):
            n = math.prod(shape(v)) * v.type.dtype.itemsize
            views.append(arena[off:off + n].view(self.dtypes[v]).view(shape(v)))
        return views

    @property
    def sources(self) -> list[str]:
        """The Triton module of each kernel, in launch order."""
        return [launcher.source for launcher in self.launchers]

    def __call__(self, *tensors) -> list:
        if len(tensors) != len(self.graph.inputs):
            raise TypeError(f"compiled graph takes {len(self.graph.inputs)} tensors,"
                            f" got {len(tensors)}")
        sizes = tuple(tensors[i].shape[d] for _, i, d in self.bindings)
        dims = self.shape_fn(*sizes)

        def shape(v):
            start, rank = self.dims[self.shapes[v]]
            return dims[start:start + rank]
        env = {}
        for i, (v, t) in enumerate(zip(self.graph.inputs, tensors)):
            if tuple(t.shape) != shape(v) or t.dtype != self.dtypes[v]:
                raise TypeError(f"compiled graph input {i}: got {t.dtype}{list(t.shape)},"
                                " which is not what it was compiled for")
            env[v] = t
        device = tensors[0].device if tensors else _default_device()
        views = []
        if self.arena_values and not sizes:  # static: the views are made once per thread
            key = _arena_key(device)
            views = getattr(self._local, "views", {}).get(key)
            if views is None:
                views = self._local.__dict__.setdefault("views", {})[key] = \
                    self._views(device, sizes, shape)
        elif self.arena_values:
            views = self._views(device, sizes, shape)
        for unit, placed in zip(self.units, self.placement):
            args = [env[v] for v in unit.inputs]
            if unit.kind == "kernel":
                args = [a.contiguous() for a in args]
                outs = []
                for v, i in zip(unit.outputs, placed):
                    if i is None:
                        outs.append(_fresh(shape(v), self.dtypes[v], device))
                    else:
                        outs.append(views[i])
                if unit.values and not unit.fn.emitted.fits(unit.numels(*sizes)):
                    # int32 indices would overflow at these sizes: torch runs the region.
                    stats.STATS.fallback_calls += 1
                    for out, r in zip(outs, _eager(unit.body)(*args)):
                        out.copy_(r)
                elif unit.values:
                    unit.fn(*args, *outs, values=[sizes[k] for k in unit.values])
                else:
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
                if unit.sized:
                    args.append(sizes)
                result = unit.fn(*args)
                single = unit.kind in ("extern", "view") and len(unit.outputs) == 1
                outs = [result] if single else list(result)
            env.update(zip(unit.outputs, outs))
        return [env[v] for v in self.graph.outputs]


def _arena_key(device):
    if device.type == "cuda":
        return (device, torch.cuda.current_stream(device).cuda_stream)
    return device


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
        n.attrs["device"] for n in graph.walk() if "device" in n.attrs}
    if not interpreting() and "cpu" in devices:
        raise ValueError("the triton backend found a CUDA device, so it compiles for the GPU,"
                         " and this graph has CPU tensors: move them to CUDA, or set"
                         " TRITON_INTERPRET=1 to run Triton's interpreter on the CPU")
    graph = prepare(graph, options)
    return _with_compiled(TritonGraph(graph, options))


def _with_compiled(compiled: TritonGraph):
    def call(*tensors):
        return compiled(*tensors)

    call.compiled = compiled
    return call


TRITON = register_backend(Backend(
    "triton", compile_graph, differentiable=False,
    doc="fused regions as Triton kernels: CUDA, or Triton's interpreter on the CPU;"
        " externs and fallbacks via torch",
    row_major=True, options=OPTIONS,
))
