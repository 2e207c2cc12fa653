"""What a call costs once refcomp runs a frame eagerly: past `cache_size_limit`, and a
frame that falls back whole.  Side by side with eager and torch.compile.

    python bench/fallback.py [--rounds 15]

Cases (each a tiny function on an 8-element tensor, so the overhead is what shows):
- `past_limit_2` / `past_limit_8`: a Python float argument changes on every call
  (`dynamic=False`: every value is a new entry); after `cache_size_limit` entries
  (2, and the default 8) each call misses every entry and runs eagerly.  torch.compile
  with `torch._dynamo.config.recompile_limit` set alike runs eagerly there too.
- `whole_frame_fallback`: a frame refcomp runs eagerly as a whole (it makes and drives
  a generator, RB014), called with the same arguments: one guard check that passes,
  then the function.  torch.compile runs it with its own graph breaks.

Timing: median of `--rounds` interleaved rounds, each a batch of calls per candidate.
Issue 12's target: <= 1.3x eager on a tiny function.  Numbers move with machine load:
compare ratios from one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refcomp  # noqa: E402


def tiny(x, n):
    return x * n + 1.0


def gen_frame(x, n):
    def g():
        yield x * n
    return next(g()) + 1.0


def _values(fixed=False):
    k = 0
    while True:  # a float the call has never seen: every call misses (unless fixed)
        k += 0 if fixed else 1
        yield 0.5 + k * 1e-3


def refcomp_past_limit(fn, limit):
    cf = refcomp.compile(fn, backend="eager", dynamic=False,
                         options={"cache_size_limit": limit})
    return cf


def inductor_past_limit(fn, limit):
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = limit
    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.specialize_float = True
    return torch.compile(fn, backend="eager", dynamic=False)


def time_calls(fn, x, values, batch):
    t = time.perf_counter()
    for _ in range(batch):
        fn(x, next(values))
    return (time.perf_counter() - t) / batch


def run_case(name, fn, limit, rounds, batch=2000, fixed=False):
    x = torch.randn(8)
    cands = {"eager": fn, "refcomp": refcomp_past_limit(fn, limit)}
    try:
        cands["torch.compile"] = inductor_past_limit(fn, limit)
    except Exception as e:  # pragma: no cover - depends on the torch build
        print(f"torch.compile unavailable: {e}")
    values = _values(fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in cands.values():  # fill the caches: past the limit from here on
            for _ in range(limit + 2):
                f(x, next(values))
        samples = {k: [] for k in cands}
        for _ in range(rounds):
            for k, f in cands.items():
                samples[k].append(time_calls(f, x, values, batch))
    med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
    row = f"| {name} | " + " | ".join(f"{med[k]:.2f}" for k in cands) + " | " + \
        " | ".join(f"{med[k] / med['eager']:.2f}x" for k in cands if k != "eager") + " |"
    return list(cands), row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/fallback.py")
    ap.add_argument("--rounds", type=int, default=15)
    opts = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows, header = [], None
    for name, fn, limit, fixed in (("past_limit_2", tiny, 2, False),
                                   ("past_limit_8", tiny, 8, False),
                                   ("whole_frame_fallback", gen_frame, 8, True)):
        refcomp.reset()
        cands, row = run_case(name, fn, limit, opts.rounds, fixed=fixed)
        header = cands
        rows.append(row)
        print(row, flush=True)
    others = [k for k in header if k != "eager"]
    print("\n| case | " + " | ".join(f"{k} us/call" for k in header) + " | " +
          " | ".join(f"{k} / eager" for k in others) + " |")
    print("|---" * (1 + len(header) + len(others)) + "|")
    print("\n".join(rows))
    counters = refcomp.stats()["counters"]
    print(f"\nrefcomp counters (last case): {counters}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
