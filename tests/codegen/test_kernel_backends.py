"""Contracts both kernel backends keep, "llvm" and "triton", each test run on both.

The triton runs use Triton's interpreter on CPU tensors and are skipped as
test_triton_backend.py is: when triton is not installed, and when CUDA is present.
What only one backend has stays in test_llvm_backend.py / test_triton_backend.py, and a
backend-specific extra check here says which backend it is for.
"""

import numpy as np
import pytest
import torch

import ir
from codegen import stats
from codegen.torch_bridge import from_numpy, to_numpy
from tests.codegen.kernel_backends import (
    DTYPE_GRAPH,
    HALF_CAST_VALUES,
    assert_matches,
    compile_graph,
)


@pytest.fixture(params=["llvm", "triton"])
def backend(request):
    if request.param == "triton":
        pytest.importorskip("triton")
        from codegen.triton import interpreting

        if not interpreting():
            pytest.skip("CUDA present: tests use CPU tensors")
    return request.param


@pytest.mark.parametrize("dtype", ["f32", "f64", "i64", "i32", "f16", "bf16", "u8"])
def test_each_dtype(backend, dtype):
    graph = ir.parse(DTYPE_GRAPH.format(t=dtype))
    rng = np.random.default_rng(1)
    dt = graph.inputs[0].type.dtype
    args = [rng.integers(0 if dt.kind == "uint" else -9, 9, (6, 5)).astype(dt.np) if dt.is_int
            else rng.standard_normal((6, 5)).astype(dt.np) for _ in range(2)]
    tensors = [from_numpy(a, dt) for a in args]
    outs = compile_graph(backend, graph)(*tensors)
    for got, want, v in zip(outs, ir.run(graph, args), graph.outputs, strict=True):
        assert got.dtype == tensors[0].dtype or v.type.dtype.is_bool
        assert_matches(got, want, v.type.dtype)


def test_unlowerable_node_falls_back_and_is_counted(backend):
    graph = ir.parse("""
func @f(%x: f32[4,5]) -> i64[4] {
  %0 = exp %x : f32[4,5]
  %1 = argmax %0 {dim=1} : i64[4]
  return %1
}""")
    before = stats.snapshot()
    x = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    (got,) = compile_graph(backend, graph)(torch.from_numpy(x))
    np.testing.assert_array_equal(got.numpy(), ir.run(graph, [x])[0])
    after = stats.snapshot()
    assert after["fallback_nodes"] > before["fallback_nodes"]
    assert after["fallback_calls"] > before["fallback_calls"]


def test_same_kernel_is_compiled_once(backend):
    # A second graph with the same kernel hits the kernel cache: nothing is compiled
    # (llvm: JIT-compiled; triton: emitted and loaded).
    text = """
func @f(%x: f32[7,3]) -> f32[7,3] {
  %0 = neg %x : f32[7,3]
  %1 = exp %0 : f32[7,3]
  return %1
}"""
    compile_graph(backend, ir.parse(text))
    before = stats.snapshot()
    compile_graph(backend, ir.parse(text))
    after = stats.snapshot()
    assert after["kernel_cache_hits"] == before["kernel_cache_hits"] + 1
    assert after["kernels_compiled"] == before["kernels_compiled"]


def test_matmul_is_an_extern_call_between_kernels(backend):
    graph = ir.parse("""
func @f(%x: f32[8,16], %w: f32[16,4]) -> f32[8,4] {
  %0 = relu %x : f32[8,16]
  %1 = matmul %0, %w : f32[8,4]
  %2 = tanh %1 : f32[8,4]
  return %2
}""")
    fn = compile_graph(backend, graph)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    calls = stats.snapshot()["extern_calls"]
    (got,) = fn(torch.from_numpy(x), torch.from_numpy(w))
    np.testing.assert_allclose(got.numpy(), ir.run(graph, [x, w])[0], rtol=1e-5, atol=1e-5)
    assert stats.snapshot()["extern_calls"] == calls + 1
    assert len(fn.compiled.kernels) == 2
    if backend == "triton":
        assert len(fn.compiled.sources) == 2  # a Triton module per kernel


def test_symbolic_sizes_compile_once_for_every_size(backend):
    # Note [Runtime sizes]: the kernel takes s0 as an argument; new sizes compile nothing.
    graph = ir.parse("""
func @f(%x: f32[s0,3]) -> f32[s0] {
  %0 = sigmoid %x : f32[s0,3]
  %1 = sum %0 {dims=[1]} : f32[s0]
  return %1
}""")
    fn = compile_graph(backend, graph)
    (kernel,) = fn.compiled.kernels
    assert [str(p) for p in kernel.params] == ["s0"]
    compiled = stats.snapshot()["kernels_compiled"]
    for n in (2, 5, 2, 9):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        (got,) = fn(torch.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), ir.run(graph, [x])[0], rtol=1e-5, atol=1e-6)
    assert stats.snapshot()["kernels_compiled"] == compiled


# The message of a call with one tensor too many, where a backend has its own.
TOO_MANY_TENSORS = {"triton": "takes 1 tensors, got 2"}
VALID_OPTIONS = {"llvm": "fuse, plan", "triton": "fuse, max_rblock"}


def test_wrong_input_shape_and_unknown_option_are_refused(backend):
    graph = ir.parse("""
func @f(%x: f32[4]) -> f32[4] {
  %0 = abs %x : f32[4]
  return %0
}""")
    with pytest.raises(TypeError, match="compiled for"):
        compile_graph(backend, graph)(torch.zeros(5))
    with pytest.raises(TypeError, match=TOO_MANY_TENSORS.get(backend)):
        compile_graph(backend, graph)(torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError, match=rf"the {backend} backend has no option\(s\) \['block'\];"
                                         f" valid: {VALID_OPTIONS[backend]}"):
        compile_graph(backend, graph, block=4)


@pytest.mark.parametrize("half", ["f16", "bf16"])
@pytest.mark.parametrize("src", ["f32", "f64", "i64"])
def test_explicit_half_casts_round_like_eager(backend, src, half):
    # Note [Half casts] (codegen/lower.py): x.to(half).float() loses the bits eager loses,
    # directly and through f64 (%2-%4); a product rounds to half (%5-%8).
    from codegen.kernel_numpy import run_kernel

    values = HALF_CAST_VALUES[src] + [-v for v in HALF_CAST_VALUES[src]]
    n = len(values)
    graph = ir.parse(f"""
func @f(%x: {src}[{n}]) -> (f32[{n}], f32[{n}], {half}[{n}], {half}[{n}]) {{
  %0 = cast %x {{dtype={half}}} : {half}[{n}]
  %1 = cast %0 {{dtype=f32}} : f32[{n}]
  %2 = cast %x {{dtype=f64}} : f64[{n}]
  %3 = cast %2 {{dtype={half}}} : {half}[{n}]
  %4 = cast %3 {{dtype=f32}} : f32[{n}]
  %5 = mul %1, %4 : f32[{n}]
  %6 = cast %5 {{dtype={half}}} : {half}[{n}]
  %7 = mul %1, %1 : f32[{n}]
  %8 = cast %7 {{dtype={half}}} : {half}[{n}]
  return %1, %4, %6, %8
}}""")
    tdtype = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64}[src]
    thalf = {"f16": torch.float16, "bf16": torch.bfloat16}[half]
    x = torch.tensor(values, dtype=torch.float64).to(tdtype)
    a = x.to(thalf).float()
    b = x.double().to(thalf).float()
    expected = [a, b, (a * b).to(thalf), (a * a).to(thalf)]
    fn = compile_graph(backend, graph)
    (kernel,) = fn.compiled.kernels
    for got, want in zip(fn(x), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    buffers = {"in0": to_numpy(x)}
    buffers.update({f"out{j}": np.zeros(n, np.float32) for j in range(len(expected))})
    run_kernel(kernel, buffers)  # the numpy executor rounds the same way
    for j, want in enumerate(expected):
        np.testing.assert_array_equal(buffers[f"out{j}"], to_numpy(want.float()))


@pytest.mark.parametrize("dims", ["[-1]", "[0]"])
@pytest.mark.parametrize("op", ["sum", "amin", "amax", "mean"])
def test_reductions_of_a_0d_tensor_over_dim_0_or_minus_1(backend, op, dims):
    """torch accepts dim 0 or -1 on a 0-d tensor and reduces its one element; the kernel
    lowering indexed dim 0 of the empty shape (IndexError on llvm and triton).  Found by
    running the fuzzer's graphs on a GPU (triton) and replayed on llvm; run on both."""
    g = ir.parse("func @f(%x: f32[]) -> f32[] {\n"
              f"  %0 = {op} %x {{dims={dims}}} : f32[]\n  return %0\n}}")
    x = torch.tensor(2.5)
    (got,) = compile_graph(backend, g)(x)
    assert got.shape == () and got.item() == 2.5
