"""Guarded inputs: the llvm call skips input checks and copies only where the guards vouch.

Note [Guarded inputs] (codegen/runtime.py): refcomp tells the backend which inputs a
TENSOR_MATCH guard pins (dtype, static sizes, contiguous strides).  A tensor that differs
in any of those must still miss the entry and recompile, and equal eager; an input no
guard pins keeps the backend's checks.
"""

import pytest
import torch

import ir
import refcomp
from codegen.backends import get_backend
from refcomp import guards as G


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def tiny(x, y):
    return torch.relu(x * y + x)


def call_source(entry) -> str:
    return entry.fn.compiled.source


@pytest.mark.parametrize("change", ["dtype", "shape", "stride"])
def test_guarded_entry_still_recompiles_on_a_changed_fact(change):
    cf = refcomp.compile(tiny, backend="llvm", dynamic=False)
    x, y = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(cf(x, y), tiny(x, y))
    (first,) = cf.cache.entries
    assert "_bad_input" not in call_source(first) and ".contiguous()" not in call_source(first)
    assert not first.contiguous  # no contiguity pass in Entry.run either
    other = {"dtype": torch.randn(8, dtype=torch.float64),
             "shape": torch.randn(5),
             "stride": torch.randn(16)[::2]}[change]
    torch.testing.assert_close(cf(other, other), tiny(other, other))
    assert len(cf.cache.entries) == 2
    failed = refcomp.stats()["frames"]
    assert any("L['x']" in k for fr in failed.values() for e in fr for k in e["guard_failures"])
    second = cf.cache.entries[1]
    if change == "stride":  # pinned, but not contiguous: the call copies it
        assert "x0 = x0.contiguous()" in call_source(second)
    torch.testing.assert_close(cf(x, y), tiny(x, y))  # the first entry still serves
    assert len(cf.cache.entries) == 2


def test_a_contiguous_view_at_an_offset_hits_and_reads_its_own_bytes():
    cf = refcomp.compile(tiny, backend="llvm", dynamic=False)
    x, y = torch.randn(8), torch.randn(8)
    cf(x, y)
    base = torch.randn(20)
    view = base[5:13]  # strides (1,), storage offset 5: the same guards hold
    torch.testing.assert_close(cf(view, y), tiny(view, y))
    assert len(cf.cache.entries) == 1


def test_dynamic_inputs_keep_their_checks():
    cf = refcomp.compile(tiny, backend="llvm", dynamic=True)
    for n in (8, 12):
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(cf(x, y), tiny(x, y))
    (entry,) = cf.cache.entries
    assert "_bad_input(0, x0)" in entry.fn.compiled.source


def test_a_dropped_tensor_guard_keeps_the_backend_checks():
    drop_x = lambda gs: [not (g.kind == G.TENSOR_MATCH and g.name == "L['x']")  # noqa: E731
                         for g in gs]
    cf = refcomp.compile(tiny, backend="llvm", dynamic=False,
                         options={"guard_filter_fn": drop_x})
    x, y = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(cf(x, y), tiny(x, y))
    (entry,) = cf.cache.entries
    assert "_bad_input(0, x0)" in call_source(entry)
    assert "_bad_input(1, x1)" not in call_source(entry)
    with pytest.raises(TypeError, match="input 0"):  # the risk accepted, yet no bad read
        cf(torch.randn(4), y)


def test_pinned_contiguous_reads_only_static_contiguous_tensor_guards():
    def f(x, y, z):
        return x + y.t() + z

    x, y, z = torch.randn(3, 4), torch.randn(4, 3), torch.randn(3, 4)
    cf = refcomp.compile(f, backend="llvm", dynamic=False)
    cf(x, y, z)
    (entry,) = cf.cache.entries
    pinned = G.pinned_contiguous(entry.guards.guards, entry.guards.input_sources)
    assert pinned == (True, True, True)
    cf(x, y.t().contiguous().t(), z)  # y non-contiguous: a second entry, y not pinned
    second = cf.cache.entries[1]
    assert G.pinned_contiguous(second.guards.guards, second.guards.input_sources) == (
        True, False, True)
    assert second.contiguous
    torch.testing.assert_close(cf(x, y.t().contiguous().t(), z), f(x, y, z))


GRAPH = """
func @f(%x: f32[8], %y: f32[8]) -> f32[8] {
  %0 = mul %x, %y : f32[8]
  %1 = add %0, %x : f32[8]
  return %1
}"""


def test_direct_backend_use_checks_unless_the_caller_vouches():
    llvm = get_backend("llvm")
    x, y = torch.randn(8), torch.randn(8)
    checked = llvm.compile_graph(ir.parse(GRAPH), {})
    with pytest.raises(TypeError, match="input 0"):
        checked(torch.randn(4), y)
    strided = torch.randn(16)[::2]
    torch.testing.assert_close(checked(strided, y)[0], strided * y + strided)
    vouched = llvm.compile_graph(ir.parse(GRAPH), {"inputs_guarded": (True, False)})
    assert "_bad_input(0" not in vouched.compiled.source
    assert "_bad_input(1, x1)" in vouched.compiled.source
    torch.testing.assert_close(vouched(x, y)[0], x * y + x)
    with pytest.raises(ValueError, match="1 flags for 2 graph inputs"):
        llvm.compile_graph(ir.parse(GRAPH), {"inputs_guarded": (True,)})
