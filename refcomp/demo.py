"""The README's demo: compile a small model, show what was captured, time it honestly.

    python -m refcomp.demo

Prints explain()'s summary (graph count, breaks, ops, guards), checks the compiled
result against eager, and reports the median time per call of both, measured
here and now with whatever backend is the default (`refcomp.default_backend()`).
"""

import statistics
import time

import torch
import torch.nn as nn

import refcomp


class Block(nn.Module):
    def __init__(self, dim: int = 256):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(self.norm(x)))
        return x + self.fc2(h) * 0.5


def median_ms(fn, x, repeats: int = 30) -> float:
    for _ in range(3):
        fn(x)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(64, 256)
    backend = refcomp.default_backend()
    with torch.no_grad():
        report = refcomp.explain(model, x, backend=backend)
        summary = str(report).split("Guards (")[0].rstrip()
        print(f"backend: {backend}\n{summary}\nGuards: {len(report.guards)}")
        compiled = refcomp.compile(model, backend=backend)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        eager_ms = median_ms(model, x)
        compiled_ms = median_ms(compiled, x)
    print(f"eager {eager_ms:.3f} ms/call, refcomp[{backend}] {compiled_ms:.3f} ms/call:"
          f" speedup {eager_ms / compiled_ms:.2f}x (median of 30, batch 64x256, this machine)")


if __name__ == "__main__":
    main()
