"""The "llvm" backend: a graph -> fused regions -> Kernels -> one LLVM object -> a callable.

Owns: `compile_graph(graph, options)` (the Backend contract of codegen/backends.py),
`compile_kernels` (Kernels -> ctypes launchers, through the kernel cache) and the
registration.  Must not know: the frontend.  Spec: spec/codegen.md, "LLVM".

Pipeline: composite ops are decomposed and pointwise/reduction nodes fused (the
`decompose` and `fuse` passes) unless the graph already has regions, and
`plan_memory` gives intermediates their arena offsets (option `plan`, default
on; Note [Arena at run time] in codegen/runtime.py); the runtime plans kernels,
externs, views and fallbacks; every new kernel of the graph is
emitted into one module, optimized at O3 for the host CPU and JIT-compiled once;
kernels whose printed form was compiled before are reused.  Inputs may have any
strides: non-contiguous inputs are copied to contiguous ones at the call (one
copy, counted in the call's time), except inputs the caller vouches for with
option `inputs_guarded` (Note [Guarded inputs] in codegen/runtime.py).  Option
`writes_back`: (input, output) index pairs whose output the caller copies into the
input after the call, each input sharing its storage with no other input (the caller's
word): an output that is then the input's own tensor was stored there in place (Note
[Inputs written in place] in codegen/runtime.py).
A symbolic graph compiles once: its kernels take the size symbols as arguments
(Note [Runtime sizes] in codegen/kernel.py), and the call reads them from the
inputs' shapes.
"""

from __future__ import annotations

import hashlib
from typing import Optional

from codegen import stats
from codegen.backends import Backend, register_backend
from codegen.kernel import Kernel, print_kernel
from codegen.llvm import jit
from codegen.llvm.emit import emit_kernel
from codegen.lower import Unsupported
from codegen.runtime import CompiledGraph, prepare
from ir.graph import Graph

OPTIONS = ("fuse", "plan", "inputs_guarded", "writes_back")


def compile_kernels(kernels: list[Kernel]) -> list[Optional[object]]:
    """A launcher `fn(*pointers, start, end)` per kernel, or None where emission failed."""
    launchers: list = [None] * len(kernels)
    module = jit.new_module("refcomp")
    pending: dict = {}  # symbol -> printed form, compiled together
    where: dict = {}  # symbol -> kernel positions
    for i, kernel in enumerate(kernels):
        key = print_kernel(kernel)
        hit = jit.cached(key)
        if hit is not None:
            stats.STATS.kernel_cache_hits += 1
            launchers[i] = jit.cfunc(hit[1], len(kernel.buffers), len(kernel.params))
            continue
        symbol = "k_" + hashlib.sha1(key.encode()).hexdigest()[:16]
        if symbol not in pending:
            try:
                emit_kernel(module, kernel, symbol)
            except (NotImplementedError, Unsupported) as e:
                module.globals.pop(symbol, None)
                stats.STATS.fallback_reasons.append(f"kernel {symbol}: {e}")
                continue
            pending[symbol] = key
        where.setdefault(symbol, []).append(i)
    if pending:
        addresses, from_disk = jit.compile_module(module, pending)
        if from_disk:
            stats.STATS.kernels_from_disk += len(pending)
        else:
            stats.STATS.kernels_compiled += len(pending)
        for symbol, positions in where.items():
            for i in positions:
                launchers[i] = jit.cfunc(addresses[symbol], len(kernels[i].buffers),
                                         len(kernels[i].params))
    return launchers


def compile_graph(graph: Graph, options: dict):
    """`fn(*tensors) -> list[Tensor]` for a CPU graph; see the module docstring."""
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ValueError(f"the llvm backend has no option(s) {sorted(unknown)};"
                         f" valid: {', '.join(OPTIONS)}")
    devices = {v.type.device for v in graph.inputs} | {
        n.attrs.get("device", "cpu") for n in graph.walk()}
    if devices - {"cpu"}:
        raise ValueError(f"the llvm backend runs on the CPU; graph uses {sorted(devices)}")
    guarded = _guarded(options.get("inputs_guarded", ()), len(graph.inputs))
    graph = prepare(graph, options)
    compiled = CompiledGraph(graph, compile_kernels, guarded)
    fn = compiled.fn
    fn.compiled = compiled
    return fn


def _guarded(flags, n_inputs: int) -> frozenset:
    """Option `inputs_guarded`: one flag per graph input, True where the caller guarantees
    the input's shape, dtype and contiguity (See Note [Guarded inputs], codegen/runtime.py)."""
    flags = tuple(flags)
    if flags and len(flags) != n_inputs:
        raise ValueError(f"inputs_guarded: {len(flags)} flags for {n_inputs} graph inputs")
    return frozenset(i for i, flag in enumerate(flags) if flag)


LLVM = register_backend(Backend(
    "llvm", compile_graph, differentiable=False,
    doc="fused regions JIT-compiled by LLVM for the host CPU; externs and fallbacks via torch",
    inputs_guarded=True, row_major=True, options=OPTIONS,
))
