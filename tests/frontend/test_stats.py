"""refcomp.stats(): what ran, from the frontend's counters and codegen's (spec/guards.md)."""

import torch

import refcomp


def test_stats_count_graphs_kernels_and_cache_hits():
    refcomp.reset()
    fn = refcomp.compile(lambda x: (x * 2 + 1).relu(), backend="llvm")
    x = torch.randn(8)
    for _ in range(3):
        torch.testing.assert_close(fn(x), (x * 2 + 1).relu())
    s = refcomp.stats()
    assert s["counters"]["graphs"] == 1 and s["counters"]["calls"] == 3
    assert s["codegen"]["kernels"] >= 1 and s["codegen"]["fallback_nodes"] == 0
    (entries,) = s["frames"].values()
    assert entries[0]["hits"] == 2 and entries[0]["backend"] == "llvm"
    refcomp.reset()
    assert refcomp.stats()["codegen"]["kernels"] == 0 and refcomp.stats()["frames"] == {}
