"""Timing, memory and kernel counting for benchmark candidates, interleaved.

Owns: `run_workload` (cold compile, interleaved medians, peak memory, kernel
counts for every candidate of one workload), `copy_bandwidth` and the candidate
factories.  Must not know: which workloads exist.

Method: candidates are compiled by calling them once (cold compile time = that
first call, compile and run); each gets warm-up calls; then `reps` rounds, each
timing every candidate once in turn (interleaved, so machine noise hits all
alike), each round timing a batch of calls long enough to measure.  Reported time
is the median over rounds, and the best round.  Each candidate's first result is
compared with eager's (largest absolute difference, reported).  Peak memory is
the growth of the process's peak RSS (VmHWM, reset through /proc/self/clear_refs)
during one warm call (smallest of three): tensors of
the inputs' size and up are mmapped by the allocator, so it sees outputs and
temporaries; small ones may be served from memory already resident.

Note [malloc and page faults]: with glibc's default (dynamic) mmap threshold,
whether a freed 16 MB tensor's memory is reused or returned to the OS depends on
the allocation history, and a returned block costs ~20 ms of page faults per
16 MB on this machine when allocated again: more than the work of most
workloads, and different for each candidate by accident.  So timing runs with
malloc keeping freed memory (mmap threshold 32 MB, no trimming), as a caching
allocator (or jemalloc/tcmalloc, which PyTorch recommends on CPU) would; the peak
memory measurement switches to a 64 kB threshold so big blocks are mmapped and
counted, after malloc_trim(0) has released the free heap pages that would otherwise
be reused unseen.
"""

from __future__ import annotations

import ctypes
import logging
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch


@dataclass
class Result:
    candidate: str
    median_s: Optional[float] = None
    min_s: Optional[float] = None  # best round: robust to load from other processes
    cpu_s: Optional[float] = None  # median CPU time per call (Note [CPU time])
    cold_s: Optional[float] = None
    peak_mb: Optional[float] = None
    kernels: Optional[int] = None
    error: str = ""
    extra: dict = field(default_factory=dict)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TIMING_MMAP_THRESHOLD = 32 << 20


def _mallopt(param: int, value: int) -> bool:
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(param, value))
    except OSError:
        return False


def configure_malloc() -> bool:
    """Keep freed memory for reuse (see Note [malloc and page faults]); False if not glibc."""
    return _mallopt(_M_MMAP_THRESHOLD, _TIMING_MMAP_THRESHOLD) and \
        _mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def _status_kb(field_name: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_memory_mb(fn: Callable, args: tuple) -> Optional[float]:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    _mallopt(_M_MMAP_THRESHOLD, 64 << 10)
    try:
        # Give free heap memory back (madvise), so reusing it shows up in RSS again.
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        before = _status_kb("VmRSS")
        out = fn(*args)
        peak = _status_kb("VmHWM")
        del out
    finally:
        _mallopt(_M_MMAP_THRESHOLD, _TIMING_MMAP_THRESHOLD)
    if before is None or peak is None:
        return None
    return max(peak - before, 0) / 1024


def copy_bandwidth(n: int, reps: int = 15) -> float:
    """GB/s of `dst.copy_(src)` on n f32 elements (bytes read + written), median."""
    src, dst = torch.randn(n), torch.empty(n)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t)
    return 2 * 4 * n / statistics.median(times) / 1e9


# Note [Accuracy check]
# Rows flagged `accuracy` (the reductions) are held to the float64 truth: the workload
# run on the inputs converted to float64, rounded back.  Each candidate's error is the
# largest |result - truth| / (|truth| max over the output, or 1); eager's own error
# is the yardstick.  A candidate is WRONG when its error exceeds ACCURACY_SLACK times
# eager's plus ACCURACY_FLOOR (a few float32 ulps, for results eager gets exactly).
# "As accurate as ATen" is then a checked property of every benchmark run.
ACCURACY_SLACK = 4.0
ACCURACY_FLOOR = 4e-7


def relative_error(out, truth) -> float:
    outs = out if isinstance(out, (tuple, list)) else [out]
    truths = truth if isinstance(truth, (tuple, list)) else [truth]
    worst = 0.0
    for o, t in zip(outs, truths):
        if tuple(o.shape) != tuple(t.shape):
            return float("inf")
        if o.numel():
            scale = max(float(t.double().abs().max()), 1.0)
            worst = max(worst, float((o.double() - t.double()).abs().max()) / scale)
    return worst


def float64_truth(workload, args):
    wide = [a.double() if a.is_floating_point() else a for a in args]
    out = workload.fn(*wide)
    return out


def max_abs_diff(out, expected) -> float:
    """Largest |out - expected| over all outputs (inf if their shapes differ)."""
    outs = out if isinstance(out, (tuple, list)) else [out]
    wants = expected if isinstance(expected, (tuple, list)) else [expected]
    worst = 0.0
    for o, w in zip(outs, wants):
        if tuple(o.shape) != tuple(w.shape):
            return float("inf")
        if o.numel():
            worst = max(worst, float((o.double() - w.double()).abs().max()))
    return worst


def _error_line(e: Exception) -> str:
    """The most telling line of a candidate's failure, for the table."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    telling = [ln for ln in lines if "Error" in ln or "error" in ln] or lines or [""]
    return f"{type(e).__name__}: {telling[-1][:200]}"


def _batch_size(fn, args) -> int:
    t = time.perf_counter()
    fn(*args)
    once = max(time.perf_counter() - t, 1e-7)
    return max(1, min(5000, int(0.02 / once)))


def train_step(forward: Callable) -> Callable:
    """A training step as users write it: `zero_grad()` (set_to_none, its default), the
    forward, `loss.backward()`; returns the loss and the parameters' `.grad`.  With
    set_to_none, autograd's AccumulateGrad keeps each gradient the backward returns when
    its layout is the parameter's, and copies it otherwise (issue 35), which
    `torch.autograd.grad` never shows."""
    def step(*args):
        params = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        for p in params:
            p.grad = None
        loss = forward(*args)
        loss.backward()
        return [loss.detach(), *(p.grad for p in params)]
    return step


def saved_activation_mb(forward: Callable, args: tuple) -> float:
    """MB of the tensors autograd keeps for backward (save_for_backward and every built-in
    op's saved values, through saved_tensors_hooks), not counting the inputs themselves."""
    inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
    seen: dict = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in inputs:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = forward(*args)
    del loss
    return sum(seen.values()) / 2**20


# Note [CPU time]: on a shared machine another process's work lengthens a round's wall
# time whenever the scheduler runs it instead of ours; the CPU time this process spends
# (time.process_time: all its threads) is not lengthened by that, only by what sharing
# a core does to caches and clocks.  The training rows (matmul-bound, tens of ms per
# step, 1 thread) moved by +-10% in wall time between identical runs on a loaded 2-core
# machine and by +-2% in CPU time, so the report gives the CPU-time median and ratio
# beside the wall-time columns.  With several threads, CPU time adds theirs up: it is
# then work, not latency.
def run_workload(workload, candidates: dict, reps: int) -> list[Result]:
    """Results per candidate (name -> factory(fn) returning (callable, kernel counter))."""
    args = workload.make_inputs()
    wrap = train_step if workload.train else (lambda f: f)
    expected = wrap(workload.fn)(*args)  # eager's answer: each candidate is checked against it
    truth = float64_truth(workload, args) if workload.accuracy else None
    eager_error = relative_error(expected, truth) if truth is not None else None
    results, ready = [], []
    for name, factory in candidates.items():
        res = Result(name)
        results.append(res)
        if workload.train and getattr(factory, "inference_only", False):
            res.error = "inference only"
            continue
        if not workload.weights and getattr(factory, "weights_only", False):
            res.error = "no weights"
            continue
        try:
            forward, count_kernels = factory(workload.fn)
            compiled = wrap(forward)
            before = count_kernels()
            t = time.perf_counter()
            out = compiled(*args)
            res.cold_s = time.perf_counter() - t
            res.extra["max_abs_diff"] = max_abs_diff(out, expected)
            if truth is not None:  # Note [Accuracy check]
                err = relative_error(out, truth)
                res.extra["rel_error"] = err
                res.extra["wrong"] = err > ACCURACY_SLACK * eager_error + ACCURACY_FLOOR
            after = count_kernels()
            res.kernels = None if before is None else after - before
            for _ in range(2):
                compiled(*args)
            # Smallest of three: other threads and allocator state only ever add to it.
            peaks = [peak_memory_mb(compiled, args) for _ in range(3)]
            res.peak_mb = None if None in peaks else min(peaks)
            if workload.train:
                res.extra["saved_mb"] = saved_activation_mb(forward, args)
            ready.append((res, compiled, _batch_size(compiled, args)))
        except Exception as e:  # report and go on: one broken candidate must not hide others
            res.error = _error_line(e)
            print(f"[{workload.name}/{name}] failed:\n{e}", file=sys.stderr, flush=True)
    if workload.bytes:
        # A plain copy of the workload's largest input, timed in the same rounds: the
        # bandwidth a memory-bound kernel is held against, under the same conditions.
        n = max(t.numel() for t in args)
        src, dst = torch.randn(n), torch.empty(n)
        dst.copy_(src)
        copy = Result("copy", extra={"bytes": 8 * n})
        results.append(copy)
        copy_fn = dst.copy_
        ready.append((copy, lambda: copy_fn(src), _batch_size(lambda: copy_fn(src), ())))
    samples: dict = {id(r): [] for r, _, _ in ready}
    cpu: dict = {id(r): [] for r, _, _ in ready}
    for _ in range(reps):
        for res, fn, batch in ready:
            t, c = time.perf_counter(), time.process_time()
            call_args = () if res.candidate == "copy" else args
            for _ in range(batch):
                fn(*call_args)
            samples[id(res)].append((time.perf_counter() - t) / batch)
            cpu[id(res)].append((time.process_time() - c) / batch)
    for res, _, _ in ready:
        res.median_s = statistics.median(samples[id(res)])
        res.min_s = min(samples[id(res)])
        res.cpu_s = statistics.median(cpu[id(res)])
    return results


# --- candidates ------------------------------------------------------------------------------
def eager_candidate(fn):
    return fn, lambda: None


def inductor_candidate(fn):
    import torch._dynamo
    import torch._inductor.metrics as metrics

    torch._dynamo.reset()
    return torch.compile(fn), lambda: metrics.generated_kernel_count


def refcomp_candidate(fn):
    import refcomp
    from codegen import stats

    return refcomp.compile(fn), lambda: stats.STATS.kernels


def refcomp_freeze_candidate(fn):
    """refcomp on a module whose buffers are the workload's weights (every input after the
    first), compiled with options={"freeze": True} in eval mode: the weights are
    compile-time values (spec/guards.md, "Freezing").  Made on the first call; later
    calls pass the same weights, so only the first input is handed on."""
    import refcomp
    from codegen import stats

    state = {}

    def run(x, *weights):
        compiled = state.get("compiled")
        if compiled is None:
            compiled = state["compiled"] = refcomp.compile(_WeightsModule(fn, weights).eval(),
                                                           options={"freeze": True})
        return compiled(x)
    return run, lambda: stats.STATS.kernels


refcomp_freeze_candidate.inference_only = True
refcomp_freeze_candidate.weights_only = True


class _WeightsModule(torch.nn.Module):
    """`fn(x, *weights)` as a module holding the weights as buffers w0, w1, ..."""

    def __init__(self, fn, weights):
        super().__init__()
        self.fn, self.count = fn, len(weights)
        for i, w in enumerate(weights):
            self.register_buffer(f"w{i}", w.detach())

    def forward(self, x):
        return self.fn(x, *[getattr(self, f"w{i}") for i in range(self.count)])


def ort_candidate(fn):
    """ONNX Runtime: `fn` exported with `torch.onnx.export(dynamo=True)` on its first call's
    inputs and run by an InferenceSession (ORT_ENABLE_ALL, one intra-op thread as the
    others run).  Inference only; tensors cross as zero-copy numpy arrays."""
    import onnxruntime as ort

    state = {}

    def run(*args):
        session = state.get("session")
        if session is None:
            session = state["session"] = _ort_session(ort, fn, args)
            state["names"] = [i.name for i in session.get_inputs()]
        feed = {name: a.detach().numpy() for name, a in zip(state["names"], args)}
        outs = [torch.from_numpy(o) for o in session.run(None, feed)]
        return outs[0] if len(outs) == 1 else tuple(outs)
    return run, lambda: None


ort_candidate.inference_only = True


def _ort_session(ort, fn, args):
    class Wrapped(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    quiet = logging.getLogger("torch.onnx")
    level, quiet.level = quiet.level, logging.ERROR  # "torchvision is not installed" x4
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(Wrapped(), tuple(args), dynamo=True, verbose=False)
    finally:
        quiet.setLevel(level)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    return ort.InferenceSession(program.model_proto.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def refcomp_noplan_candidate(fn):
    import types

    import refcomp
    from codegen import stats

    # refcomp caches per code object, whatever the options: a renamed copy of the code
    # gets its own cache, so this candidate really compiles without the plan.
    code = fn.__code__.replace(co_name=fn.__code__.co_name + "_noplan")
    twin = types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__,
                              fn.__closure__)
    return (refcomp.compile(twin, options={"backend_options": {"plan": False}}),
            lambda: stats.STATS.kernels)
