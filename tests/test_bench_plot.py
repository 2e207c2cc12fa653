"""bench/plot.py reads a `python -m bench --out` report and draws its speedups."""

from pathlib import Path

import pytest

from bench.plot import main, plot_speedups, read_results

ROOT = Path(__file__).resolve().parent.parent

REPORT = """# Benchmark results

| workload | candidate | median ms | speedup | best ms | best speedup | cold s | peak MB | kernels | notes |
|---|---|---|---|---|---|---|---|---|---|
| softmax | eager | 4.0 | 1.00x | 3.9 | 1.00x |  | 0 |  |  |
|  | copy | 1.0 |  | 1.0 |  |  |  |  |  |
|  | inductor | 5.0 | 0.80x | 4.8 | 0.81x | 3.1 | 0 | 1 |  |
|  | refcomp | 3.2 | 1.25x | 3.1 | 1.26x | 0.1 | 0 | 1 |  |
| tiny | eager | 0.005 | 1.00x | 0.005 | 1.00x |  | 0 |  |  |
|  | refcomp | error |  |  |  |  |  |  | boom |
"""


def test_read_results_takes_speedups_per_workload():
    assert read_results(REPORT) == {"softmax": {"inductor": 0.8, "refcomp": 1.25}}


def test_the_committed_report_parses():
    table = read_results((ROOT / "bench" / "RESULTS.md").read_text())
    assert "softmax" in table and "refcomp" in table["softmax"]


def test_plot_writes_an_svg(tmp_path):
    pytest.importorskip("matplotlib")
    out = plot_speedups(read_results(REPORT), tmp_path / "r.svg")
    text = out.read_text()
    assert "<svg" in text and "softmax" in text


def test_empty_report_is_an_error(tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match="no speedups to plot"):
        plot_speedups({}, tmp_path / "r.svg")


def test_command_line(tmp_path):
    pytest.importorskip("matplotlib")
    src = tmp_path / "RESULTS.md"
    src.write_text(REPORT)
    assert main([str(src), "-o", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
