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
    assert "calls" not in refcomp.stats()["counters"]
    # The wrapper keeps its cache between calls; reset() retires it, so the next call
    # compiles afresh into a new cache instead of hitting the forgotten entry.
    torch.testing.assert_close(fn(x), (x * 2 + 1).relu())
    s = refcomp.stats()
    assert s["counters"]["graphs"] == 1 and s["counters"]["calls"] == 1
    (entries,) = s["frames"].values()
    assert entries[0]["hits"] == 0 and entries[0]["guard_checks"] == 0
    fn(x)
    assert refcomp.stats()["counters"]["compiled_calls"] == 2


def test_wrappers_with_different_backends_do_not_share_entries():
    refcomp.reset()

    def f(x):
        return x.sin() * 2

    a = refcomp.compile(f, backend="interp")
    b = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    torch.testing.assert_close(a(x), f(x))
    torch.testing.assert_close(b(x), f(x))
    assert a.cache is not b.cache
    assert [e.backend for e in a.cache.entries] == ["interp"]
    assert [e.backend for e in b.cache.entries] == ["eager"]
    # The same configuration shares one cache, as torch.compile shares per code object.
    assert refcomp.compile(f, backend="interp").cache is a.cache
