"""`python -m bench.dynamic [--reps N] [--new-sizes K] [--no-inductor] [--serving-only]
[--out FILE]`: dynamic shapes (issue 16).

First the serving loops of tests/frontend/test_serving_dynamic.py (an MLP over 30 batch
sizes, a TransformerEncoderLayer over 30 (batch, sequence) pairs, llvm backend): the
first call, the other 29 (each the first at its size: ms per call and LLVM kernels they
compiled) and a second pass (steady state), for eager, refcomp with dynamic=False /
None / True and torch.compile with dynamic=True / None.  Then two questions, per
workload (pointwise_cheap, softmax, layer_norm; the inputs of bench/workloads.py, whose
first dim is the one that varies):

- *steady state*: time per call at the workload's size of kernels compiled for
  symbolic sizes (`dynamic=True`: the sizes are kernel arguments, Note [Runtime
  sizes] in codegen/kernel.py) against the static ones (`dynamic=False`), side by
  side with torch.compile both ways; interleaved medians and best rounds (the
  round least disturbed by other load; bench/harness.py);
- *first call at a new size*: after a warm call, the first call at each of K new
  sizes (rows or elements a few percent fewer), median and worst in ms, and the
  kernels compiled by those calls.  A static candidate recompiles per size (refcomp's
  static entries up to its recompile limit of 8, torch.compile's to its own).

One thread, as `python -m bench`.  Numbers are whatever this machine gives in this
run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

import torch

from bench import harness
from bench.workloads import WORKLOADS

NAMES = ("pointwise_cheap", "softmax", "layer_norm")


def _twin(fn, suffix: str):
    """A copy of fn with its own code object: refcomp caches per code object."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name + suffix)
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__,
                              fn.__closure__)


def refcomp_factory(dynamic: bool):
    def factory(fn):
        import refcomp
        from codegen import stats

        name = "_dyn" if dynamic else "_static"
        return (refcomp.compile(_twin(fn, name), backend="llvm", dynamic=dynamic),
                lambda: stats.STATS.kernels_compiled)
    return factory


def inductor_factory(dynamic: bool):
    def factory(fn):
        import torch._inductor.metrics as metrics

        name = "_dyn" if dynamic else "_static"
        return (torch.compile(_twin(fn, name), dynamic=dynamic),
                lambda: metrics.generated_kernel_count)
    return factory


def _resized(args: tuple, k: int) -> tuple:
    """The workload's inputs with the first dim of its main input shrunk by k steps
    (elements: 4096 per step; rows: 8); other inputs (weights) keep their shapes."""
    x = args[0]
    step = 4096 if x.dim() == 1 else 8
    n = x.shape[0] - k * step
    return tuple(a[:n].clone() if a.shape == x.shape else a for a in args)


def new_size_latency(factory, workload, sizes: int) -> dict:
    fn, kernels = factory(workload.fn)
    args = workload.make_inputs()
    fn(*args)
    fn(*args)
    before = kernels()
    times = []
    for k in range(1, sizes + 1):
        new = _resized(args, k)
        t = time.perf_counter()
        out = fn(*new)
        times.append(time.perf_counter() - t)
        torch.testing.assert_close(out, workload.fn(*new), rtol=1e-4, atol=1e-4)
    after = kernels()
    return {"median_ms": statistics.median(times) * 1e3, "max_ms": max(times) * 1e3,
            "kernels": None if before is None else after - before}


def serving_models():
    """The serving loops of tests/frontend/test_serving_dynamic.py: an MLP over 30 batch
    sizes and a TransformerEncoderLayer over 30 (batch, sequence) pairs."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                              torch.nn.Linear(32, 8)).eval()
    enc = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    pairs = [(2 + i % 5, 3 + i) for i in range(30)]
    return {"mlp_30_batches": (mlp, [(b, 16) for b in range(2, 32)]),
            "encoder_30_pairs": (enc, [(b, t, 16) for b, t in pairs])}


def serving_loop(make, model, shapes) -> dict:
    """The first call (compiles), then one pass over the other shapes (each a first call
    at a new size: ms per call, and the LLVM kernels those calls compiled), then a second
    pass over all (steady state, ms per call)."""
    import refcomp
    from codegen import stats

    refcomp.reset()
    torch._dynamo.reset()
    fn = make(model)
    xs = [torch.randn(*s) for s in shapes]
    out = {}
    with torch.no_grad():
        t = time.perf_counter()
        fn(xs[0])
        out["first_call_ms"] = (time.perf_counter() - t) * 1e3
        k0 = stats.STATS.kernels_compiled
        t = time.perf_counter()
        for x in xs[1:]:
            fn(x)
        out["first_pass_ms"] = (time.perf_counter() - t) * 1e3 / (len(xs) - 1)
        out["kernels"] = stats.STATS.kernels_compiled - k0
        t = time.perf_counter()
        for x in xs:
            fn(x)
        out["second_pass_ms"] = (time.perf_counter() - t) * 1e3 / len(xs)
        for x in xs:
            torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-4)
    out["graphs"] = refcomp.stats()["counters"].get("graphs", 0)
    return out


def serving_report(inductor: bool) -> list:
    import refcomp

    makers = {"eager": lambda m: m,
              "refcomp dynamic=False": lambda m: refcomp.compile(m, backend="llvm",
                                                                 dynamic=False),
              "refcomp dynamic=None": lambda m: refcomp.compile(m, backend="llvm"),
              "refcomp dynamic=True": lambda m: refcomp.compile(m, backend="llvm",
                                                                dynamic=True)}
    if inductor:
        makers["torch.compile dynamic=True"] = lambda m: torch.compile(m, dynamic=True)
        makers["torch.compile dynamic=None"] = lambda m: torch.compile(m)
    lines = ["| serving loop | candidate | first call ms | new sizes (calls 2-30) ms/call |"
             " second pass ms/call | refcomp graphs | LLVM kernels compiled by calls 2-30 |",
             "|---|---|---|---|---|---|---|"]
    for name, (model, shapes) in serving_models().items():
        for cand, make in makers.items():
            r = serving_loop(make, model, shapes)
            refc = cand.startswith("refcomp")
            row = (f"| {name} | {cand} | {r['first_call_ms']:.1f} | {r['first_pass_ms']:.2f} |"
                   f" {r['second_pass_ms']:.3f} | {r['graphs'] if refc else '-'} |"
                   f" {r['kernels'] if refc else '-'} |")
            lines.append(row)
            print(row, flush=True)
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.dynamic")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--new-sizes", type=int, default=5)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--out", default="")
    ap.add_argument("--serving-only", action="store_true")
    opts = ap.parse_args(argv)
    torch.set_num_threads(1)
    harness.configure_malloc()
    candidates = {"refcomp-static": refcomp_factory(False),
                  "refcomp-dynamic": refcomp_factory(True)}
    if not opts.no_inductor:
        candidates["inductor-static"] = inductor_factory(False)
        candidates["inductor-dynamic"] = inductor_factory(True)
    lines = ["| workload | candidate | steady ms median (best) | static/this median (best) |"
             " new-size first call ms median / max | kernels compiled at new sizes |",
             "|---|---|---|---|---|---|"]
    serving = serving_report(not opts.no_inductor)
    for name in NAMES if not opts.serving_only else ():
        w = WORKLOADS[name]
        steady = {r.candidate: r for r in harness.run_workload(w, candidates, opts.reps)}
        for cand, factory in candidates.items():
            r = steady[cand]
            static = steady[cand.replace("dynamic", "static")]
            lat = new_size_latency(factory, w, opts.new_sizes)
            ms = f"{r.median_s * 1e3:.3f} ({r.min_s * 1e3:.3f})" if not r.error else r.error
            ratio = (f"{static.median_s / r.median_s:.2f}x ({static.min_s / r.min_s:.2f}x)"
                     if not (r.error or static.error) else "")
            row = (f"| {name} | {cand} | {ms} | {ratio} | {lat['median_ms']:.1f} /"
                   f" {lat['max_ms']:.1f} | {lat['kernels']} |")
            lines.append(row)
            print(row, flush=True)
    report = "\n".join(serving) + "\n\n" + "\n".join(lines) + "\n"
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
