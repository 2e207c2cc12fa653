"""`python -m bench [--only a,b] [--reps N] [--no-inductor] [--out bench/RESULTS.md]`.

Runs every workload with every candidate on one thread (torch.set_num_threads(1),
as the targets in the LLVM backend's issue are stated) and writes a Markdown
report.  Numbers are whatever this machine gives in this run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import torch

from bench import harness
from bench.workloads import N_POINTWISE, WORKLOADS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--reps", type=int, default=15, help="interleaved rounds per workload")
    ap.add_argument("--no-inductor", action="store_true", help="skip torch.compile")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="", help="write the Markdown report here")
    opts = ap.parse_args(argv)
    torch.set_num_threads(opts.threads)
    malloc_configured = harness.configure_malloc()
    names = [n for n in opts.only.split(",") if n] or list(WORKLOADS)
    unknown = set(names) - set(WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads {sorted(unknown)}; valid: {', '.join(WORKLOADS)}")
    candidates = {"eager": harness.eager_candidate}
    if not opts.no_inductor:
        candidates["inductor"] = harness.inductor_candidate
    candidates["refcomp"] = harness.refcomp_candidate

    started = time.perf_counter()
    copy_gbs = harness.copy_bandwidth(N_POINTWISE)
    print(f"copy bandwidth (4M f32): {copy_gbs:.1f} GB/s", flush=True)
    rows = []
    for name in names:
        w = WORKLOADS[name]
        before = _refcomp_counters()
        results = harness.run_workload(w, candidates, opts.reps)
        after = _refcomp_counters()
        notes = {k: after[k] - before[k] for k in after if after[k] != before[k]}
        rows.append((w, results, notes))
        print(_text_rows(w, results, notes, copy_gbs), flush=True)
    report = _markdown(rows, copy_gbs, opts, time.perf_counter() - started, malloc_configured)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(report)
        print(f"wrote {opts.out}")
    return 0


def _refcomp_counters() -> dict:
    from codegen import stats

    snap = stats.snapshot()
    keys = ("graphs_compiled", "extern_nodes", "fallback_nodes")
    return {k: snap[k] for k in keys}


def _cells(w, res, eager_s, copy_gbs):
    if res.error:
        return ["error", "", "", "", "", res.error]
    ms = res.median_s * 1e3
    speed = f"{eager_s / res.median_s:.2f}x" if eager_s else ""
    cold = f"{res.cold_s:.2f}" if res.cold_s is not None else ""
    peak = f"{res.peak_mb:.0f}" if res.peak_mb is not None else "n/a"
    kernels = "" if res.kernels is None else str(res.kernels)
    note = ""
    if w.bytes:
        gbs = w.bytes / res.median_s / 1e9
        note = f"{gbs:.1f} GB/s = {gbs / copy_gbs:.2f} of copy"
    time_cell = f"{ms:.3f}" if ms < 1 else f"{ms:.2f}"
    return [time_cell, speed, cold, peak, kernels, note]


def _eager_time(results):
    for r in results:
        if r.candidate == "eager" and not r.error:
            return r.median_s
    return None


def _text_rows(w, results, notes, copy_gbs) -> str:
    eager_s = _eager_time(results)
    lines = [f"{w.name}:"]
    for r in results:
        lines.append("  " + r.candidate.ljust(9) + " | ".join(_cells(w, r, eager_s, copy_gbs)))
    if notes:
        lines.append(f"  refcomp counters: {notes}")
    return "\n".join(lines)


def _markdown(rows, copy_gbs, opts, seconds, malloc_configured) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        import llvmlite.binding as llvm

        cpu = llvm.get_host_cpu_name()
    except Exception:
        pass
    out = ["# Benchmark results", "",
           f"`python -m bench --reps {opts.reps}` on {cpu}, {opts.threads} thread(s)"
           f" (torch.set_num_threads), torch {torch.__version__}, Python"
           f" {sys.version.split()[0]}; whole run {seconds:.0f} s.",
           f"Copy bandwidth measured in the same run (4M f32 `copy_`): **{copy_gbs:.1f} GB/s**.",
           "malloc keeps freed memory during timing (bench/harness.py, Note [malloc and page"
           f" faults]): {'yes' if malloc_configured else 'NO (not glibc)'}.",
           "", "Time: median over interleaved rounds; speedup = eager time / time (higher is"
           " better); cold = first call incl. compilation (Inductor's includes its start-up on"
           " the first workload); peak = peak-RSS growth during one warm call; kernels ="
           " kernels generated (refcomp: LLVM kernels in the compiled graphs; Inductor: its"
           " generated-kernel counter).", "",
           "| workload | candidate | time ms | speedup | cold s | peak MB | kernels | notes |",
           "|---|---|---|---|---|---|---|---|"]
    for w, results, notes in rows:
        eager_s = _eager_time(results)
        for r in results:
            cells = _cells(w, r, eager_s, copy_gbs)
            label = f"{w.name}" if r.candidate == "eager" else ""
            if r.candidate == "refcomp" and notes:
                extra = ", ".join(f"{k}={v}" for k, v in notes.items())
                cells[5] = (cells[5] + "; " if cells[5] else "") + extra
            out.append(f"| {label} | {r.candidate} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Workloads: " + "; ".join(f"**{w.name}**: {w.note}" for w, _, _ in rows if w.note)
               + ".")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
