"""The "triton" backend equals the interpreter, running its kernels in Triton's interpreter.

Every launch in interpreter mode costs ~0.1-0.2 s (Triton patches its language
module per launch), and importing triton ~5 s once per process, so example
budgets are small and shapes tiny.  On a machine with CUDA the same tests
would need CUDA tensors; they run here only in interpreter mode.  The contracts triton
shares with the llvm backend (dtypes, fallbacks, the kernel cache, extern matmul, runtime
sizes, refused calls, half casts) are in test_kernel_backends.py.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
from codegen import stats
from codegen.backends import get_backend
from tests.codegen.kernel_backends import check_equals_interpreter
from tests.frontend.test_random_programs import check_compiled_program_equals_eager
from tests.frontend.test_random_programs import programs as random_programs
from tests.strategies import graphs

triton = pytest.importorskip("triton")

from codegen.triton import interpreting  # noqa: E402

pytestmark = pytest.mark.skipif(not interpreting(), reason="CUDA present: tests use CPU tensors")


def compile_triton(graph, **options):
    return get_backend("triton").compile_graph(graph, options)


@settings(max_examples=12, deadline=None)
@given(graphs(max_nodes=5), st.booleans(), st.sampled_from([1024, 2]))
def test_triton_equals_interpreter_on_random_graphs(case, make_strided, max_rblock):
    """max_rblock=2 makes every reduction over more than 2 points a looped one."""
    graph, args = case
    check_equals_interpreter(compile_triton(graph, max_rblock=max_rblock), graph, args,
                             make_strided)


# --- hand-written regions: Triton == the Kernel numpy executor == ir.run ----------------------

LAYER_NORM = """
func @f(%x: f32[5,6], %w: f32[6]) -> f32[5,6] {
  %0 = fused %x, %w {kind="rowwise"} : f32[5,6] {
  ^(%1: f32[5,6], %2: f32[6]):
    %3 = mean %1 {dims=[1], keepdim=true} : f32[5,1]
    %4 = expand %3 {shape=[5,6]} : f32[5,6]
    %5 = sub %1, %4 : f32[5,6]
    %6 = mul %5, %5 : f32[5,6]
    %7 = mean %6 {dims=[1], keepdim=true} : f32[5,1]
    %8 = full {value=1e-05} : f32[]
    %9 = add %7, %8 : f32[5,1]
    %10 = rsqrt %9 : f32[5,1]
    %11 = expand %10 {shape=[5,6]} : f32[5,6]
    %12 = mul %5, %11 : f32[5,6]
    %13 = reshape %2 {shape=[1,6]} : f32[1,6]
    %14 = expand %13 {shape=[5,6]} : f32[5,6]
    %15 = mul %12, %14 : f32[5,6]
    return %15
  }
  return %0
}"""

SOFTMAX_AND_VAR = """
func @f(%x: f64[3,9]) -> (f64[3,9], f64[3]) {
  %0 = softmax %x {dim=1} : f64[3,9]
  %1 = var %x {dims=[1], correction=1} : f64[3]
  return %0, %1
}"""

LAYOUTS = """
func @f(%x: f32[4,6], %y: f32[3,8]) -> (f32[6,4], f32[6]) {
  %0 = permute %x {perm=[1,0]} : f32[6,4]
  %1 = reshape %y {shape=[6,4]} : f32[6,4]
  %2 = mul %0, %1 : f32[6,4]
  %3 = amin %2 {dims=[1]} : f32[6]
  return %2, %3
}"""


def random_buffers(kernel, rng):
    bufs = {}
    for b in kernel.buffers:
        if b.is_output:
            bufs[b.name] = np.zeros(b.numel, b.dtype.np)
        else:
            bufs[b.name] = rng.standard_normal(b.numel).astype(b.dtype.np)
    return bufs


@pytest.mark.parametrize("max_rblock", [1024, 4], ids=["persistent", "looped"])
@pytest.mark.parametrize("text", [LAYER_NORM, SOFTMAX_AND_VAR, LAYOUTS],
                         ids=["layer_norm", "softmax_var", "layouts"])
def test_hand_written_regions_equal_the_kernel_executor(text, max_rblock):
    from codegen.kernel_numpy import run_kernel

    graph = ir.parse(text)
    fn = compile_triton(graph, max_rblock=max_rblock)
    (kernel,) = fn.compiled.kernels  # one region, one kernel
    (launcher,) = fn.compiled.launchers
    bufs = random_buffers(kernel, np.random.default_rng(0))
    want = {name: a.copy() for name, a in bufs.items()}
    run_kernel(kernel, want)
    tensors = [torch.from_numpy(bufs[b.name].copy()) for b in kernel.buffers]
    launcher(*tensors)
    for b, t in zip(kernel.buffers, tensors):
        if b.is_output:
            np.testing.assert_allclose(t.numpy(), want[b.name], rtol=1e-5, atol=1e-6)
    # ... and the whole graph equals the reference interpreter.
    rng = np.random.default_rng(1)
    args = [rng.standard_normal([int(d) for d in v.type.shape]).astype(v.type.dtype.np)
            for v in graph.inputs]
    for got, want_out in zip(fn(*map(torch.from_numpy, args)), ir.run(graph, args)):
        np.testing.assert_allclose(got.numpy(), want_out, rtol=1e-5, atol=1e-6)


# --- the scalar vocabulary at its edges --------------------------------------------------------

def run_as_one_kernel(graph, arrays):
    """Lower the whole graph as one region (one kernel), launch it, return its outputs."""
    from codegen.lower import lower_region
    from codegen.triton.launch import compile_kernel

    kernel = lower_region(graph)
    tensors = [torch.from_numpy(a) for a in arrays]
    outs = [torch.empty([int(d) for d in v.type.shape], dtype=tensors[0].dtype)
            for v in graph.outputs]
    compile_kernel(kernel)(*tensors, *outs)
    return outs


FLOAT_OPS = """
func @f(%x: {t}[16], %y: {t}[16]) -> ({t}[16], {t}[16], {t}[16], {t}[16], {t}[16], {t}[16],
    {t}[16], {t}[16], {t}[16], {t}[16], {t}[16], {t}[16], {t}[16]) {{
  %0 = expm1 %x : {t}[16]
  %1 = log1p %y : {t}[16]
  %2 = tanh %x : {t}[16]
  %3 = round %x : {t}[16]
  %4 = trunc %x : {t}[16]
  %5 = sign %x : {t}[16]
  %6 = floor_divide %x, %y : {t}[16]
  %7 = remainder %x, %y : {t}[16]
  %8 = fmod %x, %y : {t}[16]
  %9 = maximum %x, %y : {t}[16]
  %10 = minimum %x, %y : {t}[16]
  %11 = pow %x, %y : {t}[16]
  %12 = atan2 %x, %y : {t}[16]
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12
}}"""

EXACT = 11  # the first 11 outputs are exact to a few ulps; pow and atan2 are approximations


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_float_vocabulary_edge_values(dtype):
    graph = ir.parse(FLOAT_OPS.format(t=dtype))
    np_dtype = graph.inputs[0].type.dtype.np
    x = np.array([1e-7, -1e-7, 0.5, 1.5, 2.5, -2.5, -0.5, 3.0, -3.0, 7.25, -7.0, 0.0,
                  1e-3, 12.0, np.nan, -2.0], np_dtype)
    y = np.array([2.0, 3.0, -1.0, 0.5, 2.0, 3.0, 1e-6, -2.0, 2.0, 1.5, 3.0, 2.0,
                  -0.4, 0.25, 1.0, -3.0], np_dtype)
    got = run_as_one_kernel(graph, [x, y])
    want = ir.run(graph, [x, y])
    rtol = 2e-6 if dtype == "f32" else 1e-12
    for k, (g, w) in enumerate(zip(got, want)):
        if k < EXACT:
            np.testing.assert_allclose(g.numpy(), w, rtol=rtol, atol=0, equal_nan=True,
                                       err_msg=f"output {k}")
        else:
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-6, atol=2e-7, equal_nan=True,
                                       err_msg=f"output {k}")


INT_OPS = """
func @f(%a: {t}[8], %b: {t}[8]) -> ({t}[8], {t}[8], {t}[8], {t}[8], {t}[8], {t}[8]) {{
  %0 = floor_divide %a, %b : {t}[8]
  %1 = remainder %a, %b : {t}[8]
  %2 = fmod %a, %b : {t}[8]
  %3 = sign %a : {t}[8]
  %4 = abs %a : {t}[8]
  %5 = bitwise_xor %a, %b : {t}[8]
  return %0, %1, %2, %3, %4, %5
}}"""


@pytest.mark.parametrize("dtype", ["i64", "i32", "i8"])
def test_integer_division_by_zero_and_negative_operands(dtype):
    graph = ir.parse(INT_OPS.format(t=dtype))
    np_dtype = graph.inputs[0].type.dtype.np
    a = np.array([7, -7, 7, -7, 0, 5, -5, 9], np_dtype)
    b = np.array([2, 2, -2, -2, 3, 0, 0, -4], np_dtype)
    got = run_as_one_kernel(graph, [a, b])
    for k, (g, w) in enumerate(zip(got, ir.run(graph, [a, b]))):
        np.testing.assert_array_equal(g.numpy(), w, err_msg=f"output {k}")


BOOL_REDUCTIONS = """
func @f(%x: f32[4,7]) -> (bool[4], bool[4], i64[4]) {
  %h = full {value=0.5} : f32[]
  %0 = gt %x, %h : bool[4,7]
  %1 = any %0 {dims=[1]} : bool[4]
  %2 = all %0 {dims=[1]} : bool[4]
  %3 = sum %0 {dims=[1]} : i64[4]
  return %1, %2, %3
}"""


def test_bool_reductions():
    graph = ir.parse(BOOL_REDUCTIONS)
    x = np.random.default_rng(3).standard_normal((4, 7)).astype(np.float32)
    x[2] = 1.0  # a row where all() holds
    for got, want in zip(compile_triton(graph, max_rblock=4)(torch.from_numpy(x)),
                         ir.run(graph, [x])):
        np.testing.assert_array_equal(got.numpy(), want)


def test_full_reduction_read_back_over_the_whole_tensor():
    """x + x.sum(): the reading stage keeps its own loop variables when the reducing stage's
    are collapsed (a collapse that rewrote every stage's indices read in0[r0] here)."""
    from codegen.kernel_numpy import run_kernel
    from codegen.lower import lower_region

    graph = ir.parse("""
func @f(%x: i64[2,3]) -> i64[2,3] {
  %0 = sum %x {dims=[0,1], keepdim=true} : i64[1,1]
  %1 = expand %0 {shape=[2,3]} : i64[2,3]
  %2 = add %x, %1 : i64[2,3]
  return %2
}""")
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    want = ir.run(graph, [x])[0]
    bufs = {"in0": x.reshape(-1).copy(), "out0": np.zeros(6, np.int64)}
    run_kernel(lower_region(graph), bufs)
    np.testing.assert_array_equal(bufs["out0"].reshape(2, 3), want)
    (got,) = compile_triton(graph)(torch.from_numpy(x))
    np.testing.assert_array_equal(got.numpy(), want)


def test_reshape_of_an_empty_tensor():
    graph = ir.parse("""
func @f(%x: f32[0,3]) -> f32[3,0] {
  %0 = reshape %x {shape=[3,0]} : f32[3,0]
  %1 = exp %0 : f32[3,0]
  return %1
}""")
    (got,) = compile_triton(graph)(torch.zeros(0, 3))
    assert got.shape == (3, 0)


# --- the runtime around the kernels -----------------------------------------------------------

def test_a_kernel_without_triton_form_falls_back_and_is_counted():
    graph = ir.parse("""
func @f(%a: i64[5], %b: i64[5]) -> i64[5] {
  %0 = pow %a, %b : i64[5]
  return %0
}""")
    before = stats.snapshot()
    a, b = np.arange(5, dtype=np.int64), np.full(5, 3, np.int64)
    fn = compile_triton(graph)
    assert fn.compiled.kernels == []  # integer pow: no Triton form, run by torch
    (got,) = fn(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_array_equal(got.numpy(), ir.run(graph, [a, b])[0])
    after = stats.snapshot()
    assert after["fallback_nodes"] == before["fallback_nodes"] + 1
    assert "no Triton kernel: pow on i64" in after["fallback_reasons"][-1]


def test_symbolic_slice_bounds_and_size_values_compile_once_for_every_size():
    # Note [Symbolic slice bounds] and Note [Sizes as tensors]: x[:, s1 - 2:] / s0.
    graph = ir.parse("""
func @f(%x: f32[s0,s1]) -> f32[s0,2] {
  %0 = slice %x {dim=1, start=s1-2, stop=s1} : f32[s0,2]
  %1 = size_value {value=s0, dtype=f32} : f32[]
  %2 = div %0, %1 : f32[s0,2]
  return %2
}""")
    fn = compile_triton(graph)
    compiled = stats.snapshot()["kernels_compiled"]
    for n, m in ((3, 5), (7, 4), (2, 9)):
        x = np.random.default_rng(n).standard_normal((n, m)).astype(np.float32)
        (got,) = fn(torch.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), x[:, m - 2:] / n, rtol=1e-6)
        np.testing.assert_allclose(got.numpy(), ir.run(graph, [x])[0], rtol=1e-6)
    assert stats.snapshot()["kernels_compiled"] == compiled


# --- the memory plan: one arena, as on the CPU (spec/memory.md, "Runtime") ------------------

CHAIN = """
func @f(%x: f32[4,16], %w1: f32[16,32], %w2: f32[32,16]) -> f32[4,16] {
  %0 = matmul %x, %w1 : f32[4,32]
  %1 = relu %0 : f32[4,32]
  %2 = matmul %1, %w2 : f32[4,16]
  %3 = tanh %2 : f32[4,16]
  %4 = matmul %3, %w1 : f32[4,32]
  %5 = sum %4 {dims=[1], keepdim=true} : f32[4,1]
  %6 = expand %5 {shape=[4,16]} : f32[4,16]
  %7 = add %6, %x : f32[4,16]
  return %7
}"""


def chain_args(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) / 4 for s in ((4, 16), (16, 32), (32, 16))]


def instrument(compiled, monkeypatch):
    """Count fresh allocations; record each kernel launch's buffer addresses."""
    from codegen.triton import backend

    fresh, launches = [], []
    real = backend._fresh
    monkeypatch.setattr(backend, "_fresh", lambda *a: fresh.append(a) or real(*a))
    for unit in compiled.units:
        if unit.kind == "kernel":
            def record(*ts, _fn=unit.fn, _unit=unit):
                launches.append((_unit, [t.data_ptr() for t in ts]))
                return _fn(*ts)
            unit.fn = record
    return fresh, launches


def test_intermediates_live_in_the_arena_at_planned_offsets(monkeypatch):
    from ir.plan import check_plan

    graph = ir.parse(CHAIN)
    compiled = compile_triton(graph).compiled
    plan, arena = compiled.graph.plan, compiled.arena
    assert check_plan(compiled.graph) == []
    assert all(k.inplace == () for k in compiled.kernels)  # Triton never writes in place
    # Every planned value is in the arena: a slot without `reuses` at its planned offset;
    # an in-place result at bytes of its own past the plan's end.
    assert set(arena.offset) == {s.value for s in plan.slots} and arena.reuses == {}
    moved = [s for s in plan.slots if s.reuses is not None]
    assert len(moved) == 2
    for s in plan.slots:
        if s.reuses is None:
            assert arena.offset[s.value] == s.offset
        else:
            assert arena.offset[s.value] >= plan.arena_bytes()
    assert len(set(arena.offset.values())) < len(arena.offset)  # values share bytes
    assert arena.nbytes < sum(s.size for s in plan.slots)

    fresh, launches = instrument(compiled, monkeypatch)
    first_args, second_args = chain_args(0), chain_args(1)
    (first,) = compiled(*map(torch.from_numpy, first_args))
    kept = first.clone()
    (second,) = compiled(*map(torch.from_numpy, second_args))
    for got, args in ((first, first_args), (second, second_args)):
        np.testing.assert_allclose(got.numpy(), ir.run(graph, args)[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(first, kept)  # the second call wrote no returned tensor
    assert len(fresh) == 2  # per call, one allocation: the output
    thread_arena = compiled._thread_arenas[torch.device("cpu")]
    base = thread_arena.local.arena.data_ptr()
    for unit, pointers in launches:  # kernels read and write the planned bytes
        for v, ptr in zip(unit.inputs + unit.outputs, pointers):
            if v in arena.offset:
                assert ptr == base + arena.offset[v]
    read_from_arena = {v for unit, _ in launches for v in unit.inputs if v in arena.offset}
    matmuls = {n.outputs[0] for n in compiled.graph.nodes if n.op.name == "matmul"}
    assert matmuls <= read_from_arena  # matmul results were written there with out=


def test_without_plan_every_intermediate_is_fresh(monkeypatch):
    graph = ir.parse(CHAIN)
    compiled = compile_triton(graph, plan=False).compiled
    assert compiled.graph.plan is None and compiled.arena.offset == {}
    fresh, _ = instrument(compiled, monkeypatch)
    args = chain_args(2)
    (got,) = compiled(*map(torch.from_numpy, args))
    np.testing.assert_allclose(got.numpy(), ir.run(graph, args)[0], rtol=1e-5, atol=1e-6)
    assert len(fresh) == len(compiled.kernels) == 4 and compiled._thread_arenas == {}


def test_kernels_are_interpreted_without_changing_the_environment(tmp_path, monkeypatch):
    import os

    from triton.runtime.interpreter import InterpretedFunction

    monkeypatch.setenv("REFCOMP_TRITON_CACHE", str(tmp_path))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    graph = ir.parse("""
func @f(%x: f32[3]) -> f32[3] {
  %0 = cos %x : f32[3]
  %1 = full {value=0.25} : f32[]
  %2 = add %0, %1 : f32[3]
  return %2
}""")
    fn = compile_triton(graph)
    (launcher,) = fn.compiled.launchers
    assert isinstance(launcher.fn, InterpretedFunction)
    assert "TRITON_INTERPRET" not in os.environ
    assert [p.name for p in tmp_path.glob("*.py")] == [f"{launcher.emitted.name}.py"]
    assert (tmp_path / f"{launcher.emitted.name}.py").read_text() == launcher.source
    x = torch.tensor([0.0, 1.0, 2.0])
    torch.testing.assert_close(fn(x)[0], torch.cos(x) + 0.25)


def test_missing_triton_names_the_install_extra(monkeypatch):
    import importlib.util

    from codegen.triton import load_triton

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install -e '\.\[test\]'"):
        load_triton()


def test_refcomp_compile_with_the_triton_backend():
    import refcomp

    def f(x, w):
        return torch.softmax(x @ w, dim=-1) * 2 + torch.tanh(x).sum(-1, keepdim=True)

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    compiled = refcomp.compile(f, backend="triton")
    torch.testing.assert_close(compiled(x, w), f(x, w), rtol=1e-5, atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(random_programs())
def test_random_programs_equal_eager(program):
    """The frontend's random-program property (tests/frontend) through the triton backend."""
    check_compiled_program_equals_eager(program, "triton")


def test_a_cuda_graph_is_not_refused_as_cpu_on_a_gpu_machine(monkeypatch):
    # On a CUDA machine compile_graph refuses graphs with CPU tensors.  It once counted
    # every node without a `device` attribute (all but creation ops) as a CPU node, so it
    # refused every graph on a GPU (found by the H100 check of Nov 27).
    import codegen.triton as ct
    from codegen.triton import backend as tb

    monkeypatch.setattr(ct, "interpreting", lambda: False)
    built = []
    monkeypatch.setattr(tb, "TritonGraph", lambda graph, options: built.append(graph))
    graph = """
func @f(%x: f32[4]{at}) -> (f32[4]{at}) {{
  %0 = exp %x : f32[4]{at}
  %1 = rand {{shape=[4], device="{dev}"}} : f32[4]{rand_at}
  %2 = add %0, %1 : f32[4]{at}
  return %2
}}"""
    tb.compile_graph(ir.parse(graph.format(at="@cuda", dev="cuda", rand_at="@cuda")), {})
    assert len(built) == 1
    for at, dev, rand_at in [("", "cpu", ""), ("@cuda", "cpu", "")]:
        with pytest.raises(ValueError, match="CPU tensors"):
            tb.compile_graph(ir.parse(graph.format(at=at, dev=dev, rand_at=rand_at)), {})
    assert len(built) == 1
