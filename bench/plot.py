"""Plot benchmark results: speedup over eager per workload and candidate, as SVG/PNG.

    python -m bench.plot bench/RESULTS.md -o bench/results.svg
    python -m bench --plot out.svg ...          (plots the run it just made)

Reads the Markdown table `python -m bench --out` writes (one row per workload and
candidate; the `speedup` column is eager's median time over the candidate's), and
draws one group of horizontal bars per workload on a log axis, with a line at 1x.
Uses matplotlib (`pip install matplotlib`); without it, says so and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def read_results(markdown: str) -> dict[str, dict[str, float]]:
    """{workload: {candidate: speedup}} from a RESULTS.md table (rows without a speedup,
    such as eager itself, the `copy` reference and errors, are left out)."""
    table: dict[str, dict[str, float]] = {}
    workload = None
    header = None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == ["workload", "candidate"]:
            header = cells
            continue
        if header is None or set(cells[0]) <= {"-"} and cells[0]:
            continue
        row = dict(zip(header, cells))
        if row.get("workload"):
            workload = row["workload"]
        speed = row.get("speedup", "")
        if workload and speed.endswith("x") and row.get("candidate") not in ("eager", "copy"):
            table.setdefault(workload, {})[row["candidate"]] = float(speed[:-1])
    return table


def plot_speedups(table: dict[str, dict[str, float]], path: str | Path, title: str = "") -> Path:
    """Draw `table` to `path` (format from the suffix); returns the path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("plotting needs matplotlib: pip install matplotlib") from None
    if not table:
        raise ValueError("no speedups to plot (is this a `python -m bench --out` report?)")
    workloads = list(table)
    candidates = sorted({c for row in table.values() for c in row})
    height = 0.8 / len(candidates)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(workloads) * max(1, len(candidates))
                                    / 2))
    for k, cand in enumerate(candidates):
        ys = [i + k * height for i in range(len(workloads))]
        xs = [table[w].get(cand, 0) for w in workloads]
        bars = ax.barh(ys, xs, height=height, label=cand)
        for bar, x in zip(bars, xs):
            if x:
                ax.text(x, bar.get_y() + bar.get_height() / 2, f" {x:.2f}x", va="center",
                        fontsize=7)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(workloads))], workloads)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("speedup over eager (median; higher is better)")
    ax.set_title(title or "refcomp benchmark")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(candidates),
              fontsize=8, frameon=False)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.plot", description=__doc__.split("\n")[0])
    ap.add_argument("results", help="a report written by `python -m bench --out`")
    ap.add_argument("-o", "--output", required=True, help="out.svg or out.png")
    args = ap.parse_args(argv)
    table = read_results(Path(args.results).read_text())
    print(f"wrote {plot_speedups(table, args.output, title=Path(args.results).name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
