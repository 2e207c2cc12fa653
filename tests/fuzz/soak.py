"""Time-boxed fuzz run: `python -m tests.fuzz.soak --seconds 600 [--backends interp,eager,llvm]
[--out DIR]` (or REFCOMP_FUZZ_SECONDS=N).  Not part of the pytest suite.

Draws programs (hypothesis, random, no shrinking), runs each eagerly once and compiled on
every backend, and prints per backend the counts of programs, passes, programs where both
raised, mismatches (any wrong result, strides, aliasing, inputs after the call, exception
type) and crashes (refcomp raised where eager did not), then every failure class with its
count and the shortest program that showed it.  A new failure class is also printed when
first seen; --progress N prints the counts every N programs.  --out writes each class's
shortest program (corpus format) to DIR.  --programs N stops after N programs per backend:
the thorough profile (tests/fuzz/test_fuzz.py) is this run with N = 20,000.

--python draws the Python-level programs of tests/fuzz/pyworld.py instead (their oracle
also compares side effects, globals and the grad mode); --isolate runs the loop in child
processes, so a program that kills the interpreter (a segfault) is counted as an
"interpreter-crash" of its backend and printed, and the run goes on in a new child.
"""

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

import refcomp
from tests.fuzz.gen import programs, relaxed_checks
from tests.fuzz.grad import differentiable, grad_compare, grad_reference, grad_relaxed
from tests.fuzz.grad import signature as grad_signature
from tests.fuzz.runner import compare, reference


class _Stop(BaseException):
    """Time is up (a BaseException, so hypothesis does not treat it as a failure)."""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float,
                    default=float(os.environ.get("REFCOMP_FUZZ_SECONDS", 60)))
    ap.add_argument("--backends", default="interp,eager,llvm")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-statements", type=int, default=8)
    ap.add_argument("--programs", type=int, default=0,
                    help="stop after N programs per backend (0: only --seconds ends the run)")
    ap.add_argument("--hang-seconds", type=float, default=300,
                    help="a program running longer on one backend ends the run as a hang")
    ap.add_argument("--progress", type=int, default=0,
                    help="print the counts so far every N programs (0: only at the end)")
    ap.add_argument("--keep", type=int, default=50,
                    help="with --out, also write the first N failures of each class as they"
                         " happen, to OUT/all/ (0: none)")
    ap.add_argument("--strict", action="store_true",
                    help="generate and compare everything (ignore KNOWN_OPEN)")
    ap.add_argument("--python", action="store_true",
                    help="Python-level programs (tests/fuzz/pyworld.py)")
    ap.add_argument("--isolate", action="store_true",
                    help="run the loop in child processes: an interpreter crash is counted,"
                         " not the end of the run")
    ap.add_argument("--inflight", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--grad", action="store_true",
                    help="gradient mode (tests/fuzz/grad.py): programs with a float32/float64"
                         " input, those inputs requiring grad; forward and gradients compared")
    ap.add_argument("--sizes-as-arguments", action="store_true",
                    help="every llvm kernel runs on a body with its sizes as arguments"
                         " (codegen/share.py `every`), shared or not")
    args = ap.parse_args(argv)
    if args.sizes_as_arguments:
        import functools

        import codegen.runtime
        from codegen.share import share
        codegen.runtime.share = functools.partial(share, every=True)
    if args.isolate:
        return _isolated(args, argv if argv is not None else sys.argv[1:])
    backends = args.backends.split(",")
    counts = {b: collections.Counter() for b in backends}
    classes = {}          # (backend, signature) -> [count, shortest program, outcome]
    deadline = time.monotonic() + args.seconds
    start = time.monotonic()

    # --seed N draws a reproducible sequence of its own (hypothesis.seed); without it each
    # run draws at random.  (derandomize=True would ignore N: one sequence for every N.)
    strategy = programs(max_statements=args.max_statements, known_open=not args.strict)
    relaxed = relaxed_checks
    if args.python:
        from tests.fuzz import pyworld

        strategy = pyworld.programs(max_statements=args.max_statements,
                                    known_open=not args.strict)
        relaxed = pyworld.relaxed_checks
    if args.grad:
        strategy = strategy.filter(differentiable)
    run_reference, run_compare = ((grad_reference, grad_compare) if args.grad
                                  else (pyworld.reference, pyworld.compare) if args.python
                                  else (reference, compare))
    sign = (grad_signature if args.grad else pyworld.signature if args.python
            else (lambda out: out.signature()))
    header = {"grad": True} if args.grad else {}

    @settings(max_examples=10**9, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def soak(program):
        if time.monotonic() > deadline or stop_requested or \
                args.programs and counts[backends[0]]["programs"] >= args.programs:
            raise _Stop
        running.update(program=program, backend="eager (the reference)",
                       since=time.monotonic())
        if args.inflight:   # what a parent reports if this process dies (--isolate)
            Path(args.inflight).write_text(json.dumps({"backend": backends[0],
                                                       "program": program.render()}))
        try:
            ref = run_reference(program)   # eager runs once; every backend is compared with it
        except Exception as e:  # the harness itself must not die on a bad program
            for b in backends:
                counts[b]["harness-error"] += 1
            print(f"harness error in eager: {type(e).__name__}: {e}", file=sys.stderr)
            return
        for b in backends:
            running.update(program=program, backend=b, since=time.monotonic())
            if args.inflight:
                Path(args.inflight).write_text(json.dumps({"backend": b,
                                                           "program": program.render()}))
            try:
                relax = frozenset() if args.strict else relaxed(b)
                if args.grad and not args.strict:
                    relax |= grad_relaxed(b)
                out = run_compare(program, b, ref, relax)
            except Exception as e:  # the harness itself must not die on a bad program
                counts[b]["harness-error"] += 1
                print(f"harness error on {b}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            c = counts[b]
            c["programs"] += 1
            c[out.kind] += 1
            if out.failed:
                c["crashes" if out.kind in ("crash", "grad-crash") else "mismatches"] += 1
                key = (b, sign(out))
                entry = classes.setdefault(key, [0, program, out])
                entry[0] += 1
                if entry[0] == 1:  # a new class: shown at once, not only at the end
                    print(f"\n== new failure [{b}] {key[1]} at program"
                          f" {c['programs']}\n{program.render(**header, backends=[b], symptom=key[1])}"
                          f"{out.detail[:400]}\n", flush=True)
                if len(program.source) < len(entry[1].source):
                    entry[1], entry[2] = program, out
                if args.out and entry[0] <= args.keep:
                    # Every failure, not only each class's shortest: a class is a symptom
                    # ("stride", "value"), and one symptom can hide several bugs.
                    _write(Path(args.out) / "all", f"{b}_{c['programs']:06d}", b,
                           key[1], program, out, header=header)
        done = counts[backends[0]]["programs"]
        if args.json:
            _dump(args.json, counts, classes)
        if args.progress and done % args.progress == 0:
            print(f"progress: {time.monotonic() - start:.0f} s, {time.process_time():.0f}"
                  f" cpu-s, " + ", ".join(f"{b} {counts[b]['programs']} programs"
                                          f" {counts[b]['mismatches']} mismatches"
                                          f" {counts[b]['crashes']} crashes"
                                          for b in backends), flush=True)
        if done % 200 == 0:
            refcomp.reset()   # keep the process small over long runs

    def summary(note=""):
        if stop_requested:
            note += " (stopped by a signal)"
        print(f"soak: {time.monotonic() - start:.0f} s{note}")
        print_counts(backends, counts, classes, args.out, header)

    # A compile stuck in native code (LLVM) cannot be interrupted: a watchdog thread
    # reports the run so far and the stuck program, then ends the process.
    running = {"since": None}

    def watchdog():
        while True:
            time.sleep(2)
            since = running["since"]
            if since is not None and time.monotonic() - since > args.hang_seconds:
                b, program = running["backend"], running["program"]
                summary(f" (ended by a hang on {b})")
                print(f"\n== [{b}] hang: one program ran more than {args.hang_seconds:.0f} s"
                      f"\n{program.render(backends=[b], symptom='hang')}",
                      flush=True)
                os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    # SIGTERM/SIGINT end the run after the program in flight, with the summary (a
    # KeyboardInterrupt raised inside a ctypes callback or hypothesis was lost).
    stop_requested = False

    def request_stop(signum, frame):
        nonlocal stop_requested
        stop_requested = True

    handlers = {s: signal.signal(s, request_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    if args.seed is not None:
        soak = seed(args.seed)(soak)
    try:
        soak()
    except _Stop:
        summary()
    except KeyboardInterrupt:
        summary(" (interrupted)")
    finally:  # a caller (the thorough profile's test) goes on in this process
        running["since"] = None
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return counts


def _dump(path, counts, classes):
    """The counts and classes so far, for a parent (--isolate)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump({"counts": {b: dict(c) for b, c in counts.items()},
                   "classes": [[b, sig, n, program.render(backends=[b], symptom=sig),
                                program.source, out.detail[:2000]]
                               for (b, sig), (n, program, out) in classes.items()]}, fh)
    os.replace(tmp, path)


class _Shown:
    """A program known by its text only (a child's, under --isolate)."""

    def __init__(self, rendered, source):
        self.rendered, self.source = rendered, source

    def render(self, **header):
        return self.rendered


def _isolated(args, argv):
    """--isolate: the loop in child processes (each with its own seed), merged counts; a
    child killed by a signal counts an interpreter crash of the backend it was running."""
    import tempfile

    from tests.fuzz.runner import Outcome

    backends = args.backends.split(",")
    counts = {b: collections.Counter() for b in backends}
    classes = {}
    start = time.monotonic()
    deadline = start + args.seconds
    rest = [a for a in argv if a != "--isolate"]
    rest = [a for i, a in enumerate(rest)
            if not (a in ("--seconds", "--seed", "--programs") or
                    i and rest[i - 1] in ("--seconds", "--seed", "--programs"))]
    seed_ = args.seed if args.seed is not None else int(time.time()) % 100000
    tmp = Path(tempfile.mkdtemp(prefix="refcomp-soak-"))
    children = crashes = 0
    # SIGTERM/SIGINT to this process: passed on to the child in flight, which stops after
    # its program and reports; then the merged summary.
    stop, child = [], [None]

    def request_stop(signum, frame):
        stop.append(signum)
        if child[0] is not None and child[0].poll() is None:
            child[0].send_signal(signal.SIGTERM)

    handlers = {s: signal.signal(s, request_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    while time.monotonic() < deadline and not stop:
        done = counts[backends[0]]["programs"]
        if args.programs and done >= args.programs:
            break
        inflight, state = tmp / f"inflight{children}.json", tmp / f"state{children}.json"
        cmd = [sys.executable, "-m", "tests.fuzz.soak", *rest, "--seed", str(seed_ + children),
               "--seconds", str(max(1.0, deadline - time.monotonic())),
               "--inflight", str(inflight), "--json", str(state)]
        if args.programs:
            cmd += ["--programs", str(args.programs - done)]
        children += 1
        child[0] = subprocess.Popen(cmd)
        r = child[0]
        r.wait()
        if state.exists():
            d = json.loads(state.read_text())
            for b, c in d["counts"].items():
                counts[b].update(c)
            for b, sig, n, rendered, source, detail in d["classes"]:
                entry = classes.setdefault((b, sig), [0, _Shown(rendered, source),
                                                      Outcome(sig, detail)])
                entry[0] += n
                if len(source) < len(entry[1].source):
                    entry[1], entry[2] = _Shown(rendered, source), Outcome(sig, detail)
        if r.returncode < 0 and inflight.exists():
            crashes += 1
            d = json.loads(inflight.read_text())
            b, sig = d["backend"], f"interpreter-crash: {signal.Signals(-r.returncode).name}"
            counts[b]["programs"] += 1
            counts[b]["crashes"] += 1
            counts[b]["interpreter-crash"] += 1
            for other in backends[backends.index(b) + 1:] if b in backends else ():
                counts[other]["not-run (the child died)"] += 1
            source = d["program"]
            entry = classes.setdefault((b, sig), [0, _Shown(source, source),
                                                  Outcome("interpreter-crash", sig)])
            entry[0] += 1
            print(f"\n== [{b}] {sig}: child {children} died\n{source}", flush=True)
        elif r.returncode != 0:
            print(f"soak child exited {r.returncode}; stopping", flush=True)
            break
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    print(f"soak (--isolate, {children} children, {crashes} died"
          f"{', stopped by a signal' if stop else ''}):"
          f" {time.monotonic() - start:.0f} s")
    print_counts(backends, counts, classes, args.out)
    return counts


def print_counts(backends, counts, classes, out_dir, header=None):
    for b in backends:
        c = counts[b]
        print(f"{b:8s} programs {c['programs']:6d}  ok {c['ok']:6d}  both-raised {c['ok-raise']:5d}"
              f"  mismatches {c['mismatches']:5d}  crashes {c['crashes']:5d}  "
              + " ".join(f"{k}={v}" for k, v in sorted(c.items())
                         if k not in ("programs", "ok", "ok-raise", "mismatches", "crashes")))
    print(f"failure classes: {len(classes)}")
    for (b, sig), (n, program, out) in sorted(classes.items(), key=lambda kv: -kv[1][0]):
        print(f"\n== [{b}] {sig}  x{n}\n{program.source}{out.detail[:400]}")
    if out_dir:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        for i, ((b, sig), (n, program, out)) in enumerate(sorted(classes.items())):
            _write(d, f"{i:03d}_{b}", b, sig, program, out, count=n, header=header)


def _write(d: Path, prefix, backend, sig, program, out, count=None, header=None):
    """One failing program in corpus format (spec/testing.md, "Corpus"), ready to replay."""
    d.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"\W+", "_", f"{prefix}_{sig}")[:70]
    kwargs = dict(header or {})
    if count is not None:
        kwargs["count"] = count
    (d / f"{name}.py").write_text(program.render(backends=[backend], symptom=sig, **kwargs)
                                  + "DETAIL = " + repr(out.detail[:2000]) + "\n")


if __name__ == "__main__":
    main()
