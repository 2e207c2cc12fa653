"""codegen/: behaviours no other test pinned, found by mutation runs (tests/MUTANTS.md).

Each test names the planted bug it kills; all are cheap.
"""

import numpy as np
import pytest
import torch

import ir
from codegen import stats
from codegen.backends import get_backend


def test_reset_zeroes_every_counter():
    # Tests elsewhere read counters as differences; a counter that starts at 1 (mutant:
    # a default 0 -> 1) shows only here.  refcomp.stats() reports these after reset().
    stats.STATS.kernels += 3
    stats.STATS.fallback("node %0", "why")
    with stats.stage("lower"):
        pass
    stats.reset()
    snap = stats.snapshot()
    assert snap.pop("fallback_reasons") == []
    assert snap.pop("stage_seconds") == {}
    assert all(v == 0 for v in snap.values()), snap


@pytest.mark.parametrize("text", [
    "func @f(%x: f32[], %i: i64[1], %s: f32[]) -> f32[] {\n"
    "  %0 = index_add %x, %i, %s {dim=0} : f32[]\n  return %0\n}\n",
    "func @f(%x: f32[], %i: i64[0], %s: f32[]) -> f32[] {\n"
    "  %0 = index_add %x, %i, %s {dim=0} : f32[]\n  return %0\n}\n",
])
def test_eager_rank0_index_add_equals_the_interpreter(text):
    # torch's index_add takes no rank-0 self, so the eager backend adds directly
    # (codegen/eager.py `_scatter`; mutant: the arms of its `if index.numel()` swapped).
    graph = ir.parse(text)
    x, s = np.float32(1.5), np.float32(2.25)
    i = np.zeros(graph.inputs[1].type.shape, np.int64)
    want = ir.run(graph, [np.asarray(x), i, np.asarray(s)])[0]
    (got,) = get_backend("eager").compile_graph(graph, {})(
        torch.tensor(x), torch.from_numpy(i), torch.tensor(s))
    np.testing.assert_array_equal(got.numpy(), want)


# --- the ae9bd43 run's later survivors (tests/MUTANTS.md, codegen #37-#98) ---------------

def test_size_code_forms_of_powers_and_modulos():
    # A size holding `s**k` or `Mod(s, m)` is compiled by `py_source`/`decompose`; no kernel
    # test builds one (mutants: Pow's `return` -> None, Mod's `args[1]` -> `args[2]`).
    import sympy

    from codegen import sizes
    s = sympy.Symbol("s", integer=True, positive=True)
    cube = sizes.int_function([s], s ** 3 + sympy.Mod(s, 4))
    assert [cube(v) for v in (1, 2, 5, 7)] == [v ** 3 + v % 4 for v in (1, 2, 5, 7)]
    assert sizes.decompose(sympy.Mod(s, 3)) == ("mod", [("sym", s), ("int", 3)])
    assert sizes.decompose(s ** 2) == ("mul", [("sym", s), ("sym", s)])


def test_provably_lt_normalizes_a_symbolic_difference():
    # s*(s+1) < s**2 + s + 1 only once the difference is expanded (mutant: the `not` of
    # "both ints" removed, so symbolic differences went un-normalized and read as unknown).
    import sympy

    from codegen import sizes
    s = sympy.Symbol("s", integer=True, positive=True)
    assert sizes.provably_lt(s * (s + 1), s ** 2 + s + 1)
    assert not sizes.provably_lt(s ** 2 + s + 1, s * (s + 1))
    assert sizes.provably_lt(2, 3) and not sizes.provably_lt(3, 3)


@pytest.fixture
def dump_listener():
    """Subscribe a recording listener for the test; restore the dump state after it."""
    from codegen import dumps
    saved = (list(dumps._listeners), set(dumps._wanted))
    got = []

    def subscribe(kinds, listener=None):
        dumps.subscribe(listener or (lambda kind, name, text: got.append((kind, name, text))),
                        kinds)
        return got
    yield subscribe
    dumps._listeners[:] = saved[0]
    dumps._wanted.clear()
    dumps._wanted.update(saved[1])


def _fresh_llvm_graph():
    # A constant no other test uses, so neither the in-process nor the disk cache has it.
    c = float(np.random.default_rng().integers(1, 1 << 20)) + 0.25
    return ir.parse(f"func @f(%x: f32[4]) -> f32[4] {{\n"
                    f"  %0 = full {{value={c}, shape=[4], dtype=f32}} : f32[4]\n"
                    "  %1 = add %x, %0 : f32[4]\n  return %1\n}\n"), c


def test_dumps_deliver_only_the_kinds_asked_for(dump_listener):
    # mutants: `wanted`'s `kind in _wanted` -> `not in` / -> None, `emit`'s listener call
    # removed, the "asm" dump of codegen/llvm/jit.py removed.
    from codegen import diskcache, dumps
    got = dump_listener(["asm"])
    assert dumps.wanted("asm") and not dumps.wanted("llvm_ir")
    was = diskcache._state["enabled"]
    try:
        assert diskcache.enabled(False) is False  # a cached object would skip codegen
        assert diskcache.enabled() is False
        graph, c = _fresh_llvm_graph()
        (out,) = get_backend("llvm").compile_graph(graph, {})(torch.ones(4))
    finally:
        diskcache._state["enabled"] = was
    assert torch.equal(out, torch.full((4,), 1 + c))
    assert [kind for kind, _, _ in got] == ["asm"], [k for k, _, _ in got]
    assert got[0][2].strip()


def test_a_failing_dump_listener_changes_nothing(dump_listener, caplog):
    from codegen import dumps

    def broken(kind, name, text):
        raise RuntimeError("listener bug")
    dump_listener(["triton"], broken)
    with caplog.at_level("WARNING", logger="refcomp.codegen"):
        dumps.emit("triton", "k0", "source")
    assert "listener bug" in caplog.text
    got = dump_listener(["triton"])
    dumps.emit("triton", "k1", "text")
    dumps.emit("asm", "k1", "not asked for")
    assert got == [("triton", "k1", "text")]


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "u8"])
def test_llvm_isnan_equals_the_interpreter(dtype):
    # isnan of a float reads `x != x`; of an int it is false (mutant: the `not` of
    # `not x.dtype.is_float` removed made float isnan constant false).
    graph = ir.parse(f"func @f(%x: {dtype}[4]) -> bool[4] {{\n  %0 = isnan %x : bool[4]\n"
                     "  return %0\n}\n")
    np_dtype = graph.inputs[0].type.dtype.np
    x = np.array([1, np.nan, -2, np.inf] if dtype[0] == "f" else [1, 0, 7, 3], np_dtype)
    (got,) = get_backend("llvm").compile_graph(graph, {})(torch.from_numpy(x))
    np.testing.assert_array_equal(got.numpy(), ir.run(graph, [x])[0])
    if dtype[0] == "f":
        assert got.tolist() == [False, True, False, False]


def test_where_of_mixed_dtypes_has_the_promoted_dtype_on_llvm():
    graph = ir.parse("func @f(%c: bool[3], %a: f32[3], %b: i32[3]) -> f32[3] {\n"
                     "  %0 = where %c, %a, %b : f32[3]\n  return %0\n}\n")
    c, a, b = np.array([True, False, True]), np.array([0.5, 1.5, 2.5], np.float32), \
        np.array([7, 8, 9], np.int32)
    (got,) = get_backend("llvm").compile_graph(graph, {})(
        torch.from_numpy(c), torch.from_numpy(a), torch.from_numpy(b))
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), ir.run(graph, [c, a, b])[0])


@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_triton_floor_and_ceil_equal_the_interpreter(dtype):
    # mutant: floor's arms swapped (floats passed through, ints got tl.math.floor).
    pytest.importorskip("triton")
    from codegen.triton import interpreting
    if not interpreting():
        pytest.skip("CUDA present: this test uses CPU tensors")
    graph = ir.parse(f"func @f(%x: {dtype}[6]) -> ({dtype}[6], {dtype}[6]) {{\n"
                     f"  %0 = floor %x : {dtype}[6]\n  %1 = ceil %x : {dtype}[6]\n"
                     "  return %0, %1\n}\n")
    np_dtype = graph.inputs[0].type.dtype.np
    x = np.array([1.5, -1.5, 2.0, -0.25, 7.75, 0.0] if dtype == "f32" else
                 [1, -1, 2, -7, 7, 0], np_dtype)
    got = get_backend("triton").compile_graph(graph, {})(torch.from_numpy(x))
    for g, w in zip(got, ir.run(graph, [x])):
        np.testing.assert_array_equal(g.numpy(), w)


def test_triton_counts_each_kernel_it_compiles():
    # mutant: `kernels_compiled += 1` -> `-= 1` on the Triton launch path.
    pytest.importorskip("triton")
    from codegen.triton import interpreting
    if not interpreting():
        pytest.skip("CUDA present: this test uses CPU tensors")
    c = float(np.random.default_rng().integers(1, 1 << 20)) + 0.5  # a kernel no test made
    graph = ir.parse(f"func @f(%x: f32[5]) -> f32[5] {{\n"
                     f"  %0 = full {{value={c}, shape=[5], dtype=f32}} : f32[5]\n"
                     "  %1 = mul %x, %0 : f32[5]\n  return %1\n}\n")
    before = stats.snapshot()["kernels_compiled"]
    (out,) = get_backend("triton").compile_graph(graph, {})(torch.ones(5))
    assert stats.snapshot()["kernels_compiled"] == before + 1
    assert torch.equal(out, torch.full((5,), c))


def test_triton_interpret_variable_forces_the_interpreter(monkeypatch):
    # With CUDA present, TRITON_INTERPRET=1 still means "interpret" (mutant: its
    # `return True` -> False; on a machine without CUDA both answer True).
    from codegen.triton import interpreting
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert interpreting() is True
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert interpreting() is False


def _grads_of(fn, x):
    x = x.clone().requires_grad_(True)
    y = fn(x)
    y.sum().backward()
    return y.detach(), x.grad


def test_interp_backend_graphs_that_need_grad_still_get_gradients():
    # The numpy interpreter records no autograd: a graph whose outputs need grad must not
    # be handed to it as is (mutant: interp declared `differentiable=True`).
    import refcomp

    def f(x):
        return torch.sin(x) * x
    x = torch.linspace(-1, 1, 6)
    want = _grads_of(f, x)
    got = _grads_of(refcomp.compile(f, backend="interp"), x)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


def test_a_callable_backend_gets_the_user_graph_once_and_autograd_records_through_it():
    # fx.callable_backend: the user's fn compiles the graph as captured and torch records
    # autograd through the eager code it runs, as torch.compile does (mutant:
    # `differentiable=True` -> False sent a partitioned forward + backward to the backend).
    import refcomp
    calls = []

    def backend(gm, inputs):
        calls.append(len(inputs))
        return gm

    def f(x):
        return torch.cos(x) * 2
    x = torch.linspace(-1, 1, 5)
    want = _grads_of(f, x)
    got = _grads_of(refcomp.compile(f, backend=backend), x)
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    assert calls == [1]
