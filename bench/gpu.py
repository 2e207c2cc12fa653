"""The benchmark workloads on a CUDA GPU: eager, torch.compile (Inductor), refcomp "triton".

Run: `python -m bench.gpu [--workloads softmax,layer_norm] [--reps 20]
[--candidates eager,torch.compile,refcomp-triton]`.  Without a CUDA device it prints
why and exits 0, so it can sit in any script.  Workloads are bench/workloads.py's
(the CPU suite's), with their inputs moved to the GPU.  `--interpret` runs the
same flow on the CPU in Triton's interpreter: a check of this script (the tests
use it on `tiny`), not a benchmark.

Method: each candidate's first call is its cold time (trace, compile, run).
Then, per round, every candidate runs a batch of calls in turn (interleaved, so
clock and thermal drift hit all alike), timed between device synchronizations;
the reported time is the median per call over rounds.  Each candidate's result
is checked against eager (max abs error reported; a mismatch is flagged, not
hidden).  The refcomp column also reports the Triton kernels it launched and its
torch fallbacks, from codegen.stats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def _device_args(workload, device: str) -> tuple:
    return tuple(t.to(device) if isinstance(t, torch.Tensor) else t
                 for t in workload.make_inputs())


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _outputs(result) -> list:
    if isinstance(result, torch.Tensor):
        return [result]
    return [t for t in result if isinstance(t, torch.Tensor)]


def _max_error(got, want) -> float:
    errors = [(g.double() - w.double()).abs().max().item()
              for g, w in zip(_outputs(got), _outputs(want)) if g.numel()]
    return max(errors, default=0.0)


def _time_batch(fn, args, calls: int) -> float:
    _sync()
    started = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    _sync()
    return (time.perf_counter() - started) / calls


CANDIDATES = ("eager", "torch.compile", "refcomp-triton")


def make_candidate(name: str, fn):
    import refcomp

    if name == "eager":
        return fn
    if name == "torch.compile":
        return torch.compile(fn)
    return refcomp.compile(fn, backend="triton")


def _why_eager(fn) -> str:
    entry = getattr(fn, "last_entry", None)
    reason = getattr(entry, "reason", None)
    return f"the frame ran eagerly ({reason})" if reason is not None else \
        "no kernel in the compiled graph"


def run_workload(workload, reps: int, names=CANDIDATES, device: str = "cuda") -> list[dict]:
    from codegen import stats

    args = _device_args(workload, device)
    want = workload.fn(*args)
    _sync()
    rows, timed = [], {}
    for name in names:
        fn = make_candidate(name, workload.fn)
        row = {"workload": workload.name, "candidate": name}
        before = stats.snapshot()
        try:
            started = time.perf_counter()
            got = fn(*args)
            _sync()
            row["cold_s"] = time.perf_counter() - started
            row["max_err"] = _max_error(got, want)
            timed[name] = fn
        except Exception as e:  # reported in the table, never hidden
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        after = stats.snapshot()
        if name == "refcomp-triton":
            row["kernels"] = after["kernels"] - before["kernels"]
            row["fallbacks"] = after["fallback_nodes"] - before["fallback_nodes"]
            if row["kernels"] == 0 and "error" not in row:
                # Its time would be eager's under refcomp's name (on Python 3.12 every frame
                # runs eagerly with RB007): say so, and do not time it.
                row["error"] = f"no Triton kernel ran: {_why_eager(fn)}"
                timed.pop(name, None)
        rows.append(row)
    calls = {}
    for name, fn in timed.items():
        fn(*args)  # warm-up
        t = _time_batch(fn, args, 1)
        calls[name] = max(1, min(200, int(0.02 / max(t, 1e-6))))  # ~20 ms batches
    samples = {name: [] for name in timed}
    for _ in range(reps):
        for name, fn in timed.items():
            samples[name].append(_time_batch(fn, args, calls[name]))
    for row in rows:
        if row["candidate"] in samples:
            row["median_ms"] = statistics.median(samples[row["candidate"]]) * 1e3
    return rows


def _table(rows: list[dict]) -> str:
    lines = ["| workload | candidate | median ms | vs eager | cold s | max err | kernels |"
             " fallbacks | error |", "|" + "---|" * 9]
    eager = {r["workload"]: r.get("median_ms") for r in rows if r["candidate"] == "eager"}
    for r in rows:
        ms = r.get("median_ms")
        base = eager.get(r["workload"])
        speed = f"{base / ms:.2f}x" if ms and base else ""
        cells = [r["workload"], r["candidate"], f"{ms:.3f}" if ms else "",
                 speed, f"{r['cold_s']:.2f}" if "cold_s" in r else "",
                 f"{r['max_err']:.1e}" if "max_err" in r else "",
                 str(r.get("kernels", "")), str(r.get("fallbacks", "")), r.get("error", "")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="", help="comma-separated names (default: all)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--interpret", action="store_true",
                        help="no GPU: run on the CPU in Triton's interpreter (a check, slow)")
    opts = parser.parse_args(argv)
    chosen = [c for c in opts.candidates.split(",") if c]
    if set(chosen) - set(CANDIDATES):
        parser.error(f"unknown candidates {sorted(set(chosen) - set(CANDIDATES))};"
                     f" valid: {', '.join(CANDIDATES)}")
    device = "cpu" if opts.interpret else "cuda"
    if not opts.interpret and not torch.cuda.is_available():
        print("bench/gpu.py: no CUDA device (torch.cuda.is_available() is False): nothing to"
              " run.  The Triton kernels are tested on the CPU by"
              " tests/codegen/test_triton_*.py, in Triton's interpreter.")
        return 0
    from bench.workloads import WORKLOADS

    names = [n for n in opts.workloads.split(",") if n] or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; valid: {', '.join(WORKLOADS)}")
    where = "the CPU, Triton interpreter" if opts.interpret else torch.cuda.get_device_name()
    print(f"# GPU benchmarks on {where}, torch {torch.__version__}, {opts.reps} rounds\n")
    rows = []
    for name in names:
        rows.extend(run_workload(WORKLOADS[name], opts.reps, chosen, device))
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
