"""codegen/: behaviours no other test pinned, found by mutation runs (tests/MUTANTS.md).

Each test names the planted bug it kills; all are cheap.
"""

from codegen import stats


def test_reset_zeroes_every_counter():
    # Tests elsewhere read counters as differences; a counter that starts at 1 (mutant:
    # a default 0 -> 1) shows only here.  refcomp.stats() reports these after reset().
    stats.STATS.kernels += 3
    stats.STATS.fallback("node %0", "why")
    stats.reset()
    snap = stats.snapshot()
    assert snap.pop("fallback_reasons") == []
    assert all(v == 0 for v in snap.values()), snap
