"""Guard-check time per call for a 20-parameter module: refcomp vs torch.compile.

    python bench/guards.py

refcomp: time of the generated guard function of the module's cache entry (which also
extracts the 21 graph inputs), called the way the runtime calls it.  torch.compile:
time of Dynamo's C++ guard manager `check(f_locals)` for `call_module(m, x)`, in steady
state (TORCH_LOGS=guards logs one cold "Guard eval latency", ~150 us here, which is
not comparable).  Both with backend="eager" so compilation cost does not matter here.
Timings move with machine load: compare numbers from one run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import refcomp  # noqa: E402


def model() -> nn.Module:
    torch.manual_seed(0)
    # 10 Linear layers: 10 weights + 10 biases = 20 parameters.
    return nn.Sequential(*[nn.Linear(8, 8) for _ in range(10)]).eval()


def per_call_us(fn, n=20000) -> float:
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def refcomp_guard_us(m, x) -> tuple[float, int]:
    cm = refcomp.compile(m, backend="eager")
    with torch.no_grad():
        cm(x)
    cf = cm._compiled_forward
    (entry,) = cf.cache.entries
    L = cf._bind((m, x), {})  # the frame's locals, bound as the runtime binds them
    G, C, B = cf.fn.__globals__, cf.fn.__closure__, cf.builtins
    check = entry.guards.check
    with torch.no_grad():  # the entry was compiled under no_grad: grad mode is guarded
        assert check(L, G, C, B) is not None
        return per_call_us(lambda: check(L, G, C, B)), len(entry.guards.guards)


def call_module(mod, inp):
    return mod(inp)


def torch_guard_us(m, x):
    """Dynamo's guard manager for `call_module(m, x)`, checked in steady state."""
    try:
        import torch._dynamo as dynamo
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError as e:
        return None, f"unavailable ({e})"
    dynamo.reset()
    compiled = torch.compile(call_module, backend="eager")
    with torch.no_grad():
        compiled(m, x)
        entries = _debug_get_cache_entry_list(call_module.__code__)
        if not entries:
            return None, "no cache entry found"
        manager = entries[0].guard_manager
        f_locals = {"mod": m, "inp": x}
        if not manager.check(f_locals):
            return None, "guard manager rejects the frame's locals (API differs)"
        return per_call_us(lambda: manager.check(f_locals)), "guard_manager.check"


def end_to_end_us(m, x):
    cm = refcomp.compile(m, backend="eager")
    with torch.no_grad():
        cm(x)
        compiled = per_call_us(lambda: cm(x), n=2000)
        eager = per_call_us(lambda: m(x), n=2000)
    return compiled, eager


def main() -> None:
    m, x = model(), torch.randn(2, 8)
    ours, count = refcomp_guard_us(m, x)
    print(f"refcomp guard check (20 params, {count} guards, inputs extracted): {ours:.2f} us")
    theirs, how = torch_guard_us(m, x)
    if theirs is None:
        print(f"torch.compile guard eval: {how}")
    else:
        print(f"torch.compile guard eval ({how}): {theirs:.2f} us")
    compiled, eager = end_to_end_us(m, x)
    print(f"call overhead, tiny input: refcomp(eager backend) {compiled:.1f} us/call,"
          f" eager {eager:.1f} us/call")


if __name__ == "__main__":
    main()
