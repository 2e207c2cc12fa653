"""Counters of what the compiled backends built and ran, for `refcomp.stats()` and benchmarks.

Owns: `STATS` (one process-wide `CodegenStats`), `snapshot()` and `reset()`.  Must
not know: the frontend (it reads these; codegen never imports it).  Spec:
spec/codegen.md, "LLVM".

Compile-time counters (graphs, kernels, cache hits, fallbacks) are bumped while a
graph is built; per-call counters (extern calls, fallback calls) only on steps that
are slow anyway, so a kernel launch pays nothing for them.  `fallback_reasons`
keeps one line per fallback: which op or region, and why it had no kernel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CodegenStats:
    graphs_compiled: int = 0  # graphs turned into a CompiledGraph
    kernels: int = 0  # kernels in compiled graphs (cache hits included)
    kernels_compiled: int = 0  # kernels that went through LLVM
    kernel_cache_hits: int = 0  # kernels found already compiled (same printed form)
    kernels_from_disk: int = 0  # kernels loaded from the on-disk cache (codegen/diskcache.py)
    extern_nodes: int = 0  # matmul/conv2d/embedding nodes planned as library calls
    extern_calls: int = 0  # ... and executed
    fallback_nodes: int = 0  # nodes or regions planned to run op by op in torch
    fallback_calls: int = 0  # ... and executed
    fallback_reasons: list = field(default_factory=list)
    compile_seconds: float = 0.0  # lowering + LLVM time, summed

    def fallback(self, what: str, why: str) -> None:
        self.fallback_nodes += 1
        if len(self.fallback_reasons) < 200:
            self.fallback_reasons.append(f"{what}: {why}")


STATS = CodegenStats()


def snapshot() -> dict:
    """A copy of the counters as a plain dict."""
    out = asdict(STATS)
    out["fallback_reasons"] = list(STATS.fallback_reasons)
    return out


def reset() -> None:
    global STATS
    fresh = CodegenStats()
    for name, value in asdict(fresh).items():
        setattr(STATS, name, value)
