"""The generated lookup of a frame's cache (Note [One lookup per cache], refcomp/lookup.py)
picks the same entry as checking entry by entry, and leaves the same counts."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import refcomp
from refcomp.guard_kinds import KINDS
from refcomp.lookup import build_lookup, shared_prefix


class Box:
    def __init__(self, scale):
        self.scale = scale


def f(x, n, box):
    return x * n * box.scale + 1.0


def _filled_cache():
    """A cache of f with entries that differ by a float, a dtype, a shape, grad mode and
    an attribute's value, so some lines are shared and some are not."""
    refcomp.reset()
    cf = refcomp.compile(f, backend="eager", dynamic=False, options={"cache_size_limit": 64})
    calls = [(torch.ones(3), 0.5, Box(2.0)), (torch.ones(3), 0.25, Box(2.0)),
             (torch.ones(3, dtype=torch.float64), 0.5, Box(2.0)),
             (torch.ones(4), 0.5, Box(3.0))]
    for args in calls:
        cf(*args)
    with torch.no_grad():
        cf(torch.ones(3), 0.5, Box(2.0))
    return cf, cf._cache


def _distinct_n_cache():
    """Entries that each have their own n (the lookup picks the candidate by n's value,
    `value_dispatch`), and differ in later lines too (x's dtype, box's scale)."""
    refcomp.reset()
    cf = refcomp.compile(f, backend="eager", dynamic=False, options={"cache_size_limit": 64})
    for args in [(torch.ones(3), 0.5, Box(2.0)), (torch.ones(3), 0.25, Box(2.0)),
                 (torch.ones(3, dtype=torch.float64), 2.0, Box(2.0)),
                 (torch.ones(4), 1.5, Box(3.0))]:
        cf(*args)
    return cf, cf._cache


def _counts(entries):
    return [(e.guards.calls, list(e.guards.line_failures)) for e in entries]


def _entry_by_entry(entries, L, G, C, B):
    for e in entries:
        e.guards.calls += 1
        inputs = e.guards.check(L, G, C, B)
        if inputs is not None:
            return e, inputs
    return None


probe = st.tuples(st.sampled_from([(3,), (4,), (2, 3)]),
                  st.sampled_from([torch.float32, torch.float64]),
                  st.sampled_from([0.5, 0.25, 2.0, 1.5, 1, float("nan")]),
                  st.sampled_from([2.0, 3.0, "no scale"]),
                  st.booleans())


@given(probe, st.booleans())
def test_generated_lookup_equals_checking_entry_by_entry(p, distinct):
    shape, dtype, n, scale, grad = p
    cf, cache = _distinct_n_cache() if distinct else _filled_cache()
    entries = cache.entries
    assert len(entries) == (4 if distinct else 5)
    lookup = build_lookup(entries)
    # n's value picks the one candidate entry when every entry has its own n
    assert ("_D.get(" in lookup.source_code) == distinct
    box = Box(scale) if scale != "no scale" else object()  # no .scale: a load raises
    L = {"x": torch.ones(shape, dtype=dtype), "n": n, "box": box}
    G, C, B = cf.env
    with torch.set_grad_enabled(grad):
        before = _counts(entries)
        found = lookup(L, G, C, B)
        after_lookup = _counts(entries)
        expected = _entry_by_entry(entries, L, G, C, B)
        after_loop = _counts(entries)
    assert (found is None) == (expected is None)
    if found is not None:
        assert found[0] is expected[0]
        assert all(a is b for a, b in zip(found[1], expected[1]))
    delta_lookup = [(c1 - c0, [b - a for a, b in zip(f0, f1)])
                    for (c0, f0), (c1, f1) in zip(before, after_lookup)]
    delta_loop = [(c2 - c1, [b - a for a, b in zip(f1, f2)])
                  for (c1, f1), (c2, f2) in zip(after_lookup, after_loop)]
    assert delta_lookup == delta_loop


def test_shared_lines_are_a_common_prefix_checked_once():
    cf, cache = _filled_cache()
    entries = cache.entries
    codegens = [e.guards._codegen for e in entries]
    # Entries 0 and 1 differ in n's value: they share only the load of n.
    assert shared_prefix(codegens[:2]) == 1
    # Entries 0 and 2 differ only in x's dtype: n's and box's lines are shared as well.
    same_n = shared_prefix([codegens[0], codegens[2]])
    assert same_n > 1
    text = build_lookup([entries[0], entries[2]]).source_code
    first_check = next(item[1] for item in codegens[0].lines if item[0] == "require")
    assert text.count(first_check.replace("_k", "_e0k")) == 1
    assert first_check.replace("_k", "_e1k") not in text


def test_process_wide_guards_are_checked_after_the_arguments():
    """Note [Arguments first]: grad mode, default dtype and global state come last, so a
    lookup that misses every entry on an argument stops at that argument's line."""
    cf, cache = _filled_cache()
    entries = cache.entries[:2]
    for e in cache.entries:
        wide = [KINDS[guards[0].kind].process_wide for guards in e.guards.line_guards]
        assert any(wide) and wide == sorted(wide)  # arguments' lines, then process-wide
    lookup = build_lookup(entries)
    G, C, B = cf.env
    L = {"x": torch.ones(3), "n": 0.125, "box": Box(2.0)}  # no entry has n == 0.125
    before = _counts(entries)
    with torch.no_grad():  # grad mode differs as well: n's line still fails first
        assert lookup(L, G, C, B) is None
    after = _counts(entries)
    for (c0, f0), (c1, f1) in zip(before, after):
        assert c1 - c0 == 1 and [b - a for a, b in zip(f0, f1)] == [1] + [0] * (len(f0) - 1)


def test_a_full_cache_serves_hits_and_misses_through_the_lookup():
    """Past the limit, calls that match an entry still hit it (counted), others run
    eagerly; results equal eager's for both."""
    refcomp.reset()
    cf = refcomp.compile(f, backend="eager", dynamic=False, options={"cache_size_limit": 3})
    x, box = torch.randn(5), Box(1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (0.5, 0.25, 0.75, 0.125):
            cf(x, n, box)
        assert cf._cache.full == 3
        for _ in range(3):
            for n in (0.5, 0.25, 0.75, 0.125, 0.3):
                torch.testing.assert_close(cf(x, n, box), f(x, n, box))
    hits = [e.hits for e in cf._cache.entries]
    assert hits == [3, 3, 3]  # three rounds hit; the call that traced an entry is no hit
    counters = refcomp.stats()["counters"]
    assert counters["eager_calls"] >= 6  # 0.125 and 0.3, three rounds


@pytest.mark.parametrize("n_entries", [1, 2, 8])
def test_stats_count_every_check_on_the_fast_path(n_entries):
    """`guard_checks` and per-line failures stay exact when the generated lookup answers:
    100 calls that hit the last entry check every entry 100 times, and every earlier
    entry fails at its value line each time."""
    refcomp.reset()
    cf = refcomp.compile(f, backend="eager", dynamic=False,
                         options={"cache_size_limit": n_entries})
    x, box = torch.randn(2), Box(1.0)
    values = [0.5 + i for i in range(n_entries)]
    for v in values:
        cf(x, v, box)
    entries = cf._cache.entries
    before = [(e.guards.calls, sum(r["failures"] for r in e.guards.profile()), e.hits)
              for e in entries]
    for _ in range(100):  # > TIME_EVERY checks: the timed loop and the lookup both run
        cf(x, values[-1], box)
    assert cf._cache.find is not None
    for i, (e, (calls, fails, hits)) in enumerate(zip(entries, before)):
        assert e.guards.calls - calls == 100
        failed = sum(r["failures"] for r in e.guards.profile()) - fails
        assert (failed, e.hits - hits) == ((0, 100) if i == n_entries - 1 else (100, 0))
