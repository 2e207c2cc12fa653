"""bench/gpu.py: without a CUDA device it says so and exits 0; its table reports errors."""

import pytest
import torch

from bench import gpu


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script would run")
def test_gpu_bench_exits_cleanly_without_cuda(capsys):
    assert gpu.main([]) == 0
    out = capsys.readouterr().out
    assert "no CUDA device" in out and "interpreter" in out


def test_gpu_bench_table_shows_speedups_and_failures():
    rows = [{"workload": "softmax", "candidate": "eager", "median_ms": 2.0, "cold_s": 0.1,
             "max_err": 0.0},
            {"workload": "softmax", "candidate": "refcomp-triton", "median_ms": 1.0,
             "cold_s": 3.0, "max_err": 1e-7, "kernels": 1, "fallbacks": 0},
            {"workload": "softmax", "candidate": "torch.compile", "error": "RuntimeError: x"}]
    table = gpu._table(rows).splitlines()
    assert table[2].startswith("| softmax | eager | 2.000 | 1.00x |")
    assert "| 1.000 | 2.00x | 3.00 | 1.0e-07 | 1 | 0 |" in table[3]
    assert table[4].endswith("| RuntimeError: x |")


def test_gpu_bench_flow_runs_in_the_interpreter(capsys):
    pytest.importorskip("triton")
    from codegen.triton import interpreting

    if not interpreting():
        pytest.skip("a GPU is present: the script runs for real")
    assert gpu.main(["--interpret", "--workloads", "tiny", "--reps", "1",
                     "--candidates", "eager,refcomp-triton"]) == 0
    out = capsys.readouterr().out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("| tiny | refcomp-triton")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] and float(cells[5]) < 1e-5  # timed, and equal to eager
    assert cells[6] == "1" and cells[7] == "0" and cells[8] == ""  # one kernel, no fallback


def test_gpu_bench_does_not_time_eager_under_refcomps_name():
    """A frame refcomp runs eagerly (here a data-dependent shape, RB022; on the GPU
    machine's Python 3.12, every frame: RB007) launches no kernel: the row says why and is
    not timed, where it used to show eager's time as refcomp's."""
    pytest.importorskip("triton")
    from codegen.triton import interpreting

    if not interpreting():
        pytest.skip("a GPU is present: the script runs for real")
    from bench.workloads import Workload

    w = Workload("nonzero", lambda x: x.nonzero(), lambda: (torch.randn(8),))
    rows = gpu.run_workload(w, 1, ("eager", "refcomp-triton"), device="cpu")
    row = rows[1]
    assert row["kernels"] == 0 and "median_ms" not in row
    assert row["error"].startswith("no Triton kernel ran: the frame ran eagerly (") and \
        "RB022" in row["error"], row


def test_gpu_graph_check_flow_runs_in_the_interpreter(tmp_path, capsys):
    """bench/gpu_graphs.py (the triton backend on a GPU from textual IR): export a bench
    workload's graph and a few fuzzer programs' graphs, then check them; here in Triton's
    interpreter, on a GPU machine for real."""
    pytest.importorskip("triton")
    from bench import gpu_graphs
    from codegen.triton import interpreting

    if not interpreting():
        pytest.skip("a GPU is present: the check runs for real")
    assert gpu_graphs.export(tmp_path, 5, 1127, ["tiny"]) == 0
    assert sorted(tmp_path.glob("tiny_*.rir"))
    assert gpu_graphs.check(tmp_path) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("on cpu: equal ") and " differ 0, error 0" in summary
    assert int(summary.split("equal ")[1].split(",")[0]) >= 1
