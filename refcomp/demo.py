"""The README's demo: a model where fusion pays, what refcomp captured, the speedup measured.

    python -m refcomp.demo [--inductor] [--picture out.svg]

Compiles a normalisation-and-activation block (layer norm, a gated activation, a
residual, a row softmax: memory-bound work that eager runs as ~15 separate kernels),
prints explain()'s summary, checks the result against eager, and reports the median
time per call of eager, refcomp and (with --inductor) torch.compile, measured here and
now, interleaved, on one thread.  Then it says where to look next: the logs, the IR,
a picture of the fused graph.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn

import refcomp


class NormGate(nn.Module):
    """LayerNorm -> x * sigmoid(1.702 x) gate -> residual -> row softmax -> scale."""

    def __init__(self, dim: int = 1024):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.scale = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x):
        h = self.norm(x)
        h = h * torch.sigmoid(1.702 * h)
        h = x + h * self.scale
        return torch.softmax(h, dim=-1) * 2.0 - 1.0


def _median_ms(fns: dict, x, rounds: int = 15, repeats: int = 10) -> dict:
    """Interleaved rounds (each candidate in turn), median of the per-call times."""
    times = {name: [] for name in fns}
    for fn in fns.values():
        for _ in range(3):
            fn(x)
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(repeats):
                fn(x)
            times[name].append((time.perf_counter() - start) / repeats)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m refcomp.demo")
    ap.add_argument("--inductor", action="store_true",
                    help="also time torch.compile (Inductor); its first compile takes a while")
    ap.add_argument("--picture", default=None, help="where to draw the fused graph (.svg)")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = NormGate().eval()
    x = torch.randn(512, 1024)
    backend = refcomp.default_backend()
    with torch.no_grad():
        report = refcomp.explain(model, x, backend=backend)
        summary = str(report).split("Guards (")[0].rstrip()
        print(f"backend: {backend}\n{summary}\nGuards: {len(report.guards)}")
        compiled = refcomp.compile(model, backend=backend)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        fns = {"eager": model, f"refcomp[{backend}]": compiled}
        if args.inductor:
            fns["torch.compile"] = torch.compile(model)
        ms = _median_ms(fns, x)
    print("median ms/call (x: 512x1024 f32, one thread, interleaved rounds):")
    for name, t in ms.items():
        print(f"  {name:<16} {t:8.3f} ms   {ms['eager'] / t:5.2f}x eager")
    picture = Path(args.picture or Path(tempfile.gettempdir()) / "refcomp_demo.svg")
    written = report.render(picture)
    print("where to look next:")
    print("  REFCOMP_LOGS=graph_breaks,guards,ir python -m refcomp.demo   # what was captured")
    print("  REFCOMP_DEBUG_DIR=dump python -m refcomp.demo    # IR, kernels, LLVM IR, asm")
    print(f"  {written}   # the fused graph (regions as clusters, the memory plan)")


if __name__ == "__main__":
    main()
