"""Every kernel the Triton tests run in the interpreter also compiles for a GPU.

Triton's interpreter is permissive (it runs Python on numpy); its GPU compiler
is not.  `compile_for_gpu` runs the real compiler (Triton IR -> PTX -> cubin,
for sm_90) without a GPU, so the kernels CI checks for values are also checked
to be valid GPU programs.  ~1 s per new kernel (Triton caches compiled kernels
on disk), so the graphs are the hand-written ones of test_triton_backend.py (and
kernel_backends.py's DTYPE_GRAPH) and a small random sample.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
from codegen.lower import Unsupported, lower_region
from ir.passes.registry import get_pass
from tests.codegen import test_triton_backend as cases
from tests.codegen.kernel_backends import DTYPE_GRAPH
from tests.strategies import graphs

pytest.importorskip("triton")

from codegen.triton.launch import compile_for_gpu  # noqa: E402


def region_kernels(graph):
    """The Kernels of a graph's fused regions (as the backend would build them)."""
    graph = get_pass("fuse")(get_pass("decompose")(graph))
    kernels = []
    for node in graph.nodes:
        if node.body is not None:
            try:
                kernels.append(lower_region(node.body))
            except Unsupported:
                pass
    return kernels


def assert_compiles(kernel, max_rblock=1024):
    compiled = compile_for_gpu(kernel, max_rblock)
    assert compiled.asm["cubin"] and ".entry" in compiled.asm["ptx"]


HAND_WRITTEN = {
    "layer_norm": cases.LAYER_NORM,
    "softmax_var": cases.SOFTMAX_AND_VAR,
    "layouts": cases.LAYOUTS,
}


@pytest.mark.parametrize("max_rblock", [1024, 4], ids=["persistent", "looped"])
@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written_regions_compile_for_sm90(name, max_rblock):
    (kernel,) = region_kernels(ir.parse(HAND_WRITTEN[name]))
    assert_compiles(kernel, max_rblock)


@pytest.mark.parametrize("text, dtype", [
    (cases.FLOAT_OPS, "f32"), (cases.FLOAT_OPS, "f64"), (cases.INT_OPS, "i64"),
    (cases.INT_OPS, "i8"), (DTYPE_GRAPH, "bf16"), (DTYPE_GRAPH, "f16"),
    (DTYPE_GRAPH, "u8"), (cases.BOOL_REDUCTIONS, ""),
], ids=["float_ops-f32", "float_ops-f64", "int_ops-i64", "int_ops-i8", "dtypes-bf16",
        "dtypes-f16", "dtypes-u8", "bool_reductions"])
def test_vocabulary_and_dtypes_compile_for_sm90(text, dtype):
    graph = ir.parse(text.format(t=dtype) if dtype else text)
    # The vocabulary graphs are lowered whole (one kernel, as the run tests do).
    whole = text in (cases.FLOAT_OPS, cases.INT_OPS)
    kernels = [lower_region(graph)] if whole else region_kernels(graph)
    assert kernels
    for kernel in kernels:
        assert_compiles(kernel, max_rblock=4)


@settings(max_examples=6, deadline=None)
@given(graphs(max_nodes=5, allow_zero_size=False), st.sampled_from([1024, 2]))
def test_random_graph_kernels_compile_for_sm90(case, max_rblock):
    graph, _ = case
    for kernel in region_kernels(graph):
        assert_compiles(kernel, max_rblock)


def test_symbolic_kernels_compile_for_sm90():
    # Note [Runtime sizes]: size symbols are int arguments; strides, decode divisors and a
    # mean's count are expressions of them.
    from tests.codegen.test_kernel import SYMBOLIC

    kernels = region_kernels(ir.parse(SYMBOLIC))
    assert kernels and all(k.params for k in kernels)
    for kernel in kernels:
        assert_compiles(kernel)


@pytest.mark.parametrize("text", [
    "func @f(%x: f32[3000]) -> f32[] {\n  %0 = var %x {dims=[0], correction=1} : f32[]\n"
    "  return %0\n}",
    "func @f(%x: f32[1,1000]) -> f32[1,1000] {\n  %0 = softmax %x {dim=1} : f32[1,1000]\n"
    "  return %0\n}",
    "func @f(%x: i64[2,700]) -> i64[2] {\n  %0 = amax %x {dims=[1]} : i64[2]\n  return %0\n}",
], ids=["var", "softmax_row", "amax_i64"])
def test_split_reductions_compile_for_sm90(text, monkeypatch):
    """Note [Split reductions]: every launch of a split kernel (thresholds lowered)."""
    from codegen.triton import emit
    from codegen.triton.launch import compile_split_for_gpu

    monkeypatch.setattr(emit, "SPLIT_MIN_LENGTH", 256)
    monkeypatch.setattr(emit, "SPLIT_MIN_CHUNK", 64)
    monkeypatch.setattr(emit, "SPLIT_PROGRAMS", 16)
    split = [k for k in region_kernels(ir.parse(text)) if emit.split_plan(k)]
    assert split
    for kernel in split:
        compiled = compile_split_for_gpu(kernel, 32)
        assert len(compiled) >= 3
        for c in compiled:
            assert c.asm["cubin"] and ".entry" in c.asm["ptx"]
