"""`python -m bench [--only a,b] [--reps N] [--no-inductor] [--no-plan] [--out bench/RESULTS.md]
[--plot bench/results.svg]`.

`refcomp-freeze` (unless `--no-freeze`) is refcomp compiling a module that holds the
weights of the rows that have them (mlp, transformer2, conv_bn_relu) as buffers, with
`options={"freeze": True}`: the inference use of a trained model.

`--no-plan` adds the candidate `refcomp-noplan`: the llvm backend without its
memory plan (every intermediate a fresh tensor), to compare peak memory and time.

Runs every workload with every candidate on one thread (torch.set_num_threads(1),
as the targets in the LLVM backend's issue are stated) and writes a Markdown
report.  Numbers are whatever this machine gives in this run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
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
    ap.add_argument("--no-ort", action="store_true",
                    help="skip ONNX Runtime (the 'bench' extra; inference rows only)")
    ap.add_argument("--no-freeze", action="store_true",
                    help="skip refcomp-freeze (refcomp with options={'freeze': True} on the"
                    " rows whose inputs after the first are weights)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-plan", action="store_true",
                    help="also run refcomp without the memory plan (refcomp-noplan)")
    ap.add_argument("--out", default="", help="write the Markdown report here")
    ap.add_argument("--plot", default="", help="draw the speedups here (.svg/.png; matplotlib)")
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
    if not opts.no_ort and importlib.util.find_spec("onnxruntime") is not None:
        candidates["ort"] = harness.ort_candidate
    candidates["refcomp"] = harness.refcomp_candidate
    if not opts.no_freeze:
        candidates["refcomp-freeze"] = harness.refcomp_freeze_candidate
    if opts.no_plan:
        candidates["refcomp-noplan"] = harness.refcomp_noplan_candidate

    started = time.perf_counter()
    startup = {}
    for name, factory in candidates.items():
        if name != "eager":  # one-time imports and initialization, kept out of "cold"
            t = time.perf_counter()
            fn, _ = factory(lambda x: x * 2.0 + 1.0)
            fn(torch.ones(4))
            startup[name] = time.perf_counter() - t
            print(f"{name} start-up: {startup[name]:.1f} s", flush=True)
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
    report = _markdown(rows, copy_gbs, opts, time.perf_counter() - started, malloc_configured,
                       startup)
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(report)
        print(f"wrote {opts.out}")
    if opts.plot:
        from bench.plot import plot_speedups, read_results

        print(f"wrote {plot_speedups(read_results(report), opts.plot)}")
    wrong = [f"{w.name}/{r.candidate}" for w, results, _ in rows for r in results
             if r.extra.get("wrong")]
    if wrong:  # Note [Accuracy check] in bench/harness.py
        print(f"WRONG results (beyond eager's accuracy): {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


def _refcomp_counters() -> dict:
    from codegen import stats

    snap = stats.snapshot()
    # kernels_size_shared: kernels on a body shared across sizes (codegen/share.py)
    keys = ("graphs_compiled", "extern_nodes", "fallback_nodes", "kernels_size_shared")
    return {k: snap[k] for k in keys}


def _cells(w, res, eager, copy_gbs):
    eager_s, eager_best = eager[:2]
    if res.error:
        return ["error", "", "", "", "", "", "", res.error]
    ms = res.median_s * 1e3
    speed = f"{eager_s / res.median_s:.2f}x" if eager_s and res.candidate != "copy" else ""
    cold = f"{res.cold_s:.2f}" if res.cold_s is not None else ""
    peak = f"{res.peak_mb:.0f}" if res.peak_mb is not None else "n/a"
    kernels = "" if res.kernels is None else str(res.kernels)
    note = ""
    if w.bytes:  # from the best rounds: the copy's median suffers most from other load
        moved = res.extra["bytes"] if res.candidate == "copy" else w.bytes
        gbs = moved / res.min_s / 1e9
        note = f"{gbs:.1f} GB/s" if res.candidate == "copy" else \
            f"{gbs:.1f} GB/s = {gbs / copy_gbs:.2f} of copy"
    saved = res.extra.get("saved_mb")
    if saved is not None:
        note = (note + "; " if note else "") + f"saved {saved:.1f} MB"
    diff = res.extra.get("max_abs_diff")
    if diff is not None and res.candidate != "eager":
        note = (note + "; " if note else "") + f"max diff {diff:.1e}"
    eager_cpu = eager[2] if len(eager) > 2 else None
    if res.cpu_s:  # Note [CPU time] in bench/harness.py
        ratio = f" = {eager_cpu / res.cpu_s:.2f}x" if eager_cpu and res.candidate != "copy" \
            else ""
        note = (note + "; " if note else "") + f"cpu {_ms(res.cpu_s * 1e3)} ms{ratio}"
    err = res.extra.get("rel_error")
    if err is not None:  # Note [Accuracy check] in bench/harness.py
        verdict = "WRONG: " if res.extra["wrong"] else ""
        note = (note + "; " if note else "") + f"{verdict}rel error {err:.1e} vs f64"
    best = res.min_s * 1e3
    best_speed = f"{eager_best / res.min_s:.2f}x" if eager_best and res.candidate != "copy" \
        else ""
    return [_ms(ms), speed, _ms(best), best_speed, cold, peak, kernels, note]


def _ms(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}"


def _copy_gbs(w, results, fallback):
    for r in results:
        if r.candidate == "copy" and r.min_s:
            return r.extra["bytes"] / r.min_s / 1e9
    return fallback


def _eager_time(results):
    """(median, best, CPU-time median) of eager, or Nones."""
    for r in results:
        if r.candidate == "eager" and not r.error:
            return r.median_s, r.min_s, r.cpu_s
    return None, None, None


def _text_rows(w, results, notes, copy_gbs) -> str:
    eager_s = _eager_time(results)
    copy_gbs = _copy_gbs(w, results, copy_gbs)
    lines = [f"{w.name}:"]
    for r in results:
        lines.append("  " + r.candidate.ljust(15) + " | ".join(_cells(w, r, eager_s, copy_gbs)))
    if notes:
        lines.append(f"  refcomp counters: {notes}")
    return "\n".join(lines)


def _markdown(rows, copy_gbs, opts, seconds, malloc_configured, startup) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        import llvmlite.binding as llvm

        cpu = llvm.get_host_cpu_name()
    except Exception:
        pass
    out = ["# Benchmark results", "",
           f"`python -m bench --reps {opts.reps}{' --no-plan' if opts.no_plan else ''}`"
           f" on {cpu}, {opts.threads} thread(s)"
           f" (torch.set_num_threads), torch {torch.__version__}, Python"
           f" {sys.version.split()[0]}; whole run {seconds:.0f} s.",
           f"Copy bandwidth at the start of the run (4M f32 `copy_`): {copy_gbs:.1f} GB/s;"
           " workloads with a byte count also time a `copy_` of their largest input in the same"
           " interleaved rounds (candidate `copy`), and their GB/s ratios are against that.",
           "Start-up (first compile of `x * 2 + 1`, imports included; not in the cold times"
           " below): " + ", ".join(f"{k} {v:.1f} s" for k, v in startup.items()) + ".",
           "malloc keeps freed memory during timing (bench/harness.py,"
           f" Note [malloc and page faults]): {'yes' if malloc_configured else 'NO (not glibc)'}.",
           *(["`refcomp-freeze` is refcomp on a module holding the row's weights (its inputs"
              " after the first) as buffers, compiled in eval mode with"
              " `options={\"freeze\": True}` (spec/guards.md, \"Freezing\")."]
             if not opts.no_freeze else []),
           *(["`refcomp-noplan` is refcomp with the backend option plan=False (every"
              " intermediate a fresh tensor; spec/memory.md, \"Runtime\"); where a graph has"
              " no intermediates both compile the same code, and their difference is the"
              " run's noise."] if opts.no_plan else []),
           "", "Time: median over interleaved rounds, and the best round (the machine is shared:"
           " other processes load it, and the best round is the least disturbed); speedup ="
           " eager time / time, each from the same statistic (higher is better);"
           " cold = first call incl. compilation; GB/s from best rounds, against the"
           " `copy` candidate's best round (a copy of the largest input); max diff = largest"
           " |result - eager result|; rel error = largest |result - float64 truth| / max"
           " |truth| on the reduction rows, WRONG beyond 4x eager's error + 4e-7 (Note"
           " [Accuracy check] in bench/harness.py); peak = peak-RSS growth during one warm"
           " call; kernels ="
           " kernels generated (refcomp: LLVM kernels in the compiled graphs; Inductor: its"
           " generated-kernel counter); saved = MB autograd keeps for the backward"
           " (training rows: saved tensors other than the inputs, through"
           " saved_tensors_hooks; each candidate its own forward + backward, timed as one"
           " step); cpu = median CPU time of this process per call, and eager's over it"
           " (not lengthened when other processes take the core: Note [CPU time] in"
           " bench/harness.py); the copy's too, the roofline of a memory-bound row on a"
           " loaded machine.", "",
           "| workload | candidate | median ms | speedup | best ms | best speedup | cold s |"
           " peak MB | kernels | notes |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for w, results, notes in rows:
        eager_s = _eager_time(results)
        copy_gbs_here = _copy_gbs(w, results, copy_gbs)
        for r in results:
            cells = _cells(w, r, eager_s, copy_gbs_here)
            label = f"{w.name}" if r.candidate == "eager" else ""
            if r.candidate == "refcomp" and notes:
                extra = ", ".join(f"{k}={v}" for k, v in notes.items())
                cells[7] = (cells[7] + "; " if cells[7] else "") + extra
            out.append(f"| {label} | {r.candidate} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Workloads: " + "; ".join(f"**{w.name}**: {w.note}" for w, _, _ in rows if w.note)
               + ".")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
