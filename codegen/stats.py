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

import gc
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

# The stages of a compile, timed by `stage` (each one's own time: a stage nested in another
# is not counted twice).  "trace" runs in refcomp/, "passes" is the pass manager's run of
# the pipeline, "autodiff" the joint graph and its partition, "fuse" and "plan_memory" the
# backends' passes, "lower" the kernels' construction, "llvm" LLVM's optimizer and JIT.
STAGES = ("trace", "passes", "autodiff", "fuse", "plan_memory", "lower", "llvm")


@dataclass
class CodegenStats:
    graphs_compiled: int = 0  # graphs turned into a CompiledGraph
    kernels: int = 0  # kernels in compiled graphs (cache hits included)
    kernels_compiled: int = 0  # kernels that went through LLVM
    kernel_cache_hits: int = 0  # kernels found already compiled (same printed form)
    kernels_from_disk: int = 0  # kernels loaded from the on-disk cache (codegen/diskcache.py)
    kernels_size_shared: int = 0  # kernels run by a body shared across sizes (codegen/share.py)
    extern_nodes: int = 0  # matmul/conv2d/embedding nodes planned as library calls
    extern_calls: int = 0  # ... and executed
    fallback_nodes: int = 0  # nodes or regions planned to run op by op in torch
    fallback_calls: int = 0  # ... and executed
    fallback_reasons: list = field(default_factory=list)
    compile_seconds: float = 0.0  # lowering + LLVM time, summed
    stage_seconds: dict = field(default_factory=dict)  # stage -> seconds, every compile

    def fallback(self, what: str, why: str) -> None:
        self.fallback_nodes += 1
        if len(self.fallback_reasons) < 200:
            self.fallback_reasons.append(f"{what}: {why}")


STATS = CodegenStats()
_open: list = []  # the stages being timed, innermost last: [name, seconds of nested stages]
_records: list = []  # the per-compile records collecting stage times (`collecting`)


@contextmanager
def stage(name: str):
    """Time the block as stage `name` (one of STAGES), less the stages nested in it; the
    time goes to STATS.stage_seconds and to every open `collecting` record."""
    start = time.perf_counter()
    _open.append([name, 0.0])
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        _, nested = _open.pop()
        if _open:
            _open[-1][1] += elapsed
        own = elapsed - nested
        STATS.stage_seconds[name] = STATS.stage_seconds.get(name, 0.0) + own
        for record in _records:
            record[name] = record.get(name, 0.0) + own


@contextmanager
def collecting():
    """A dict filled with the seconds of each stage run inside the block (one graph's
    compile: refcomp keeps it on the entry, stats() and explain() report it)."""
    record: dict = {}
    _records.append(record)
    try:
        yield record
    finally:
        _records.remove(record)


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
    STATS.stage_seconds = {}


# Note [Compiles without the cycle collector]: a compile allocates hundreds of thousands of
# small objects (nodes, values, types, dicts) that all stay alive until it ends, and each
# of CPython's cycle collections walks the whole heap: a 160-block training compile spent
# its time in collections triggered by allocation, growing with the square of the model.
# Compiles run with the collector paused (reference counting still frees what dies); it
# runs again, as before, when the compile ends.
@contextmanager
def gc_paused():
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
