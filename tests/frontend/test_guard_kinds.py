"""Guard kinds as records (refcomp/guard_kinds.py): the spec table is checked against them,
every kind explains a failure with expected and actual values; recompile controls
(set_stance, history, the limit warning) and the guard profile."""

import re
import warnings
from pathlib import Path

import pytest
import torch

import refcomp
from refcomp import guards as G
from refcomp.guard_kinds import KINDS, spec_table

SPEC = Path(__file__).resolve().parents[2] / "spec" / "guards.md"


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.set_stance("default")
    refcomp.reset()


def spec_rows() -> list:
    text = SPEC.read_text()
    table = text[text.index("| fact the trace relied on | guard kind | check |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        fact, kind, check = [c.strip() for c in line.strip("|").split(" | ")]
        rows.append((fact, kind.strip("`"), check))
    return rows


def test_spec_table_is_the_kind_records():
    assert spec_rows() == spec_table()
    assert set(G.GUARD_KINDS) == set(KINDS)


def test_every_kind_has_emit_describe_and_explain():
    for k in KINDS.values():
        assert callable(k.emit) and callable(k.describe) and callable(k.explain), k.name


def test_failures_name_expected_and_actual():
    def f(x, n, d, opts):
        return x * n + d["a"] + len(opts)

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(3)
    cf(x, 2, {"a": 1.0}, [1])
    cf(x.double(), 3, {"a": 1.0, "b": 2}, [1, 2])
    (miss,) = cf.cache.history
    text = {str(fail) for _, failed in miss.failures for fail in failed}
    assert "L['x'].dtype == torch.float32 (actual: torch.float64)" in text
    assert "L['n'] == 2 (actual: 3)" in text
    assert "list(L['d'].keys()) == ['a'] (actual: ['a', 'b'])" in text
    assert "type(L['opts']) is list and len(L['opts']) == 1 (actual: list of length 2)" in text
    assert "L['n'] == 2" in cf.cache.miss_reasons[0][1]  # expected facts only


def test_history_keeps_every_miss():
    # dynamic=False: automatic dynamic would make n a symbol after one miss
    cf = refcomp.compile(lambda x, n: x + n, backend="eager", dynamic=False)
    x = torch.ones(2)
    for n in range(5):
        cf(x, n)
    assert [m.number for m in cf.cache.history] == [1, 2, 3, 4]
    assert all(m.outcome == "recompiled" for m in cf.cache.history)
    assert "L['n'] == 0 (actual: 4)" in str(cf.cache.history[-1])
    (frame,) = refcomp.stats()["recompiles"].values()
    assert len(frame) == 4


def test_limit_warning_names_function_line_and_fix():
    def scale(x, n):
        return x * n

    cf = refcomp.compile(scale, backend="eager", options={"cache_size_limit": 2})
    x = torch.ones(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(4):
            assert torch.equal(cf(x, n), x * n)
    (w,) = [w for w in caught if "cache_size_limit" in str(w.message)]
    msg = str(w.message)
    line = scale.__code__.co_firstlineno
    assert f"scale ({__file__}:{line})" in msg
    assert "L['n'] == 0 (last actual: 2)" in msg
    assert "pass it as a tensor" in msg and "'cache_size_limit': 4" in msg


def test_stance_as_context_manager_restores_and_rejects_bad_names():
    cf = refcomp.compile(lambda x: x + 1, backend="eager")
    with refcomp.set_stance("force_eager"):
        with refcomp.set_stance("eager_on_recompile"):
            from refcomp import stance
            assert stance.current() == "eager_on_recompile"
        assert stance.current() == "force_eager"
        assert torch.equal(cf(torch.ones(1)), torch.full((1,), 2.0))
        assert not cf.cache.entries
    assert stance.current() == "default"
    with pytest.raises(ValueError, match="unknown stance 'fast'"):
        refcomp.set_stance("fast")


def test_fail_on_recompile_allows_first_compiles():
    with refcomp.set_stance("fail_on_recompile"):
        cf = refcomp.compile(lambda x: x * 3, backend="eager")
        assert torch.equal(cf(torch.ones(2)), torch.full((2,), 3.0))
        with pytest.raises(refcomp.RecompileError, match=r"shape\[0\] == 2 \(actual: 3\)"):
            cf(torch.ones(3))


def test_guard_profile_counts_and_table():
    cf = refcomp.compile(lambda x, flag: x + 1 if flag else x - 1, backend="eager")
    x = torch.ones(2)
    for flag in (True, True, False, True, False, False):
        cf(x, flag)
    first, second = cf.cache.entries
    rows = first.guards.profile()
    flag_row = [r for r in rows if r["guard"] == "L['flag'] == True"][0]
    assert flag_row["checks"] == first.guards.calls
    assert flag_row["failures"] == first.guards.calls - first.hits
    assert first.guards.profiled >= 1 and all(r["time_us"] >= 0 for r in rows)
    table = refcomp.guard_profile()
    assert "L['flag'] == True" in table and "L['flag'] == False" in table
    assert "EQUALS_MATCH" in table


def test_global_state_failure_is_explained():
    cf = refcomp.compile(lambda x: x + 1, backend="eager")
    x = torch.ones(2)
    cf(x)
    old = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        cf(x)
    finally:
        torch.use_deterministic_algorithms(old)
    assert "deterministic algorithms False (actual: deterministic algorithms True)" in str(
        cf.cache.history[0])


def test_hostile_names_in_derived_sources_stay_data():
    hostile = "x') or __import__('os') or ('"

    class Obj:
        pass

    obj = Obj()

    def f(x):
        return x * 2 if hasattr(obj, hostile) else x

    cf = refcomp.compile(f, backend="eager")
    x = torch.ones(2)
    assert torch.equal(cf(x), x)
    setattr(obj, hostile, 1)
    assert torch.equal(cf(x), x * 2)
    for e in cf.cache.entries:
        assert hostile not in e.guards.source_code
        assert re.search(r"__import__", e.guards.source_code) is None


def test_a_check_that_raises_is_not_blamed_on_dispatch_keys():
    """Every guard holds alone but the generated check raises (two sources under one name:
    the check loads each name once; tests/frontend/test_globals_sources.py had one): the
    slow path says so instead of blaming a tensor's dispatch keys."""
    from refcomp.sources import GlobalSource, ItemSource, Source

    class OtherG(Source):  # another object under the name of the frame's global `k`
        def name(self):
            return "G['k']"

        def expr(self, cg):
            return cg.const({"a": 1})

    obj = object()
    gs = G.GuardSet([G.Guard(G.ID_MATCH, GlobalSource("k"), (id(obj), "obj")),
                     G.Guard(G.EQUALS_MATCH, ItemSource(OtherG(), "a"), 1)], [])
    globs = {"k": obj}
    assert gs.check({}, globs, {}, {}) is None
    (why,) = gs.failures({}, globs, {}, {})
    assert "the check raised" in why and "dispatch keys" not in why
