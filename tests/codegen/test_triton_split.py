"""Note [Split reductions] (codegen/triton/emit.py): a reduction to few outputs over many
elements runs as partial launches over rows x S programs, a combine of the partials, and
a final launch; run here in Triton's interpreter (no GPU on CI), with the thresholds
lowered so that small tensors split, against torch and the reference interpreter."""

import numpy as np
import pytest
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st

import ir
from codegen.backends import get_backend
from codegen.lower import lower_region
from tests.codegen.kernel_backends import check_equals_interpreter
from tests.strategies import graphs

triton = pytest.importorskip("triton")

from codegen.triton import emit, interpreting  # noqa: E402
from codegen.triton.emit import emit_split, split_plan  # noqa: E402

pytestmark = pytest.mark.skipif(not interpreting(), reason="CUDA present: tests use CPU tensors")


@pytest.fixture
def small_splits(monkeypatch):
    """Split from 256 elements a row on, chunks of at least 64, 16 programs."""
    monkeypatch.setattr(emit, "SPLIT_MIN_LENGTH", 256)
    monkeypatch.setattr(emit, "SPLIT_MIN_CHUNK", 64)
    monkeypatch.setattr(emit, "SPLIT_PROGRAMS", 16)


def _compile(text, max_rblock=32):
    return get_backend("triton").compile_graph(ir.parse(text), {"max_rblock": max_rblock})


def _region(text):
    """The one kernel of a graph given as one region."""
    return lower_region(ir.parse(text))


CASES = {
    "sum": ("func @f(%x: f32[3001]) -> f32[] {\n  %0 = sum %x {dims=[0]} : f32[]\n"
            "  return %0\n}", lambda x: x.sum()),
    "mean_rows": ("func @f(%x: f32[3,1500]) -> f32[3] {\n  %0 = mean %x {dims=[1]} : f32[3]\n"
                  "  return %0\n}", lambda x: x.mean(1)),
    "var": ("func @f(%x: f32[2000]) -> f32[] {\n  %0 = var %x {dims=[0], correction=1} : f32[]\n"
            "  return %0\n}", lambda x: x.var()),
    "amax_dims01": ("func @f(%x: f32[40,50,2]) -> f32[2] {\n"
                    "  %0 = amax %x {dims=[0,1]} : f32[2]\n  return %0\n}",
                    lambda x: x.amax((0, 1))),
    "softmax_row": ("func @f(%x: f32[1,1000]) -> f32[1,1000] {\n"
                    "  %0 = softmax %x {dim=1} : f32[1,1000]\n  return %0\n}",
                    lambda x: torch.softmax(x, 1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_full_reductions_split_and_match_torch(name, small_splits):
    text, ref = CASES[name]
    fn = _compile(text)
    (source,) = fn.compiled.sources
    assert "Note [Split reductions]" in source and ("_p0(" in source or "_w0(" in source)
    graph = ir.parse(text)
    shape = [int(d) for d in graph.inputs[0].type.shape]
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32) + 3)
    (got,) = fn(x)
    want = ref(x.double()).float()
    if name == "amax_dims01":
        assert torch.equal(got, want)  # max combines exactly
    else:
        torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-7)


def test_split_launches_cover_rows_times_splits(small_splits):
    split = emit_split(_region(CASES["var"][0]), "k")
    rows, splits = split_plan(_region(CASES["var"][0]))
    assert (rows, splits) == (1, 16)
    # var: its two passes as one Welford partial launch, the merge, the store of the result
    assert [launch.fn for launch in split.launches] == ["k_w0", "k_c0", "k_f"]
    assert [launch.grid for launch in split.launches] == [16, 1, 1]
    assert {n: k for n, _, k in split.workspace} == {"p_a0": 16, "f_a0": 1, "p_a1": 16, "f_a1": 1}


def test_default_thresholds():
    """sum of 16M elements: 1024 programs of 16K; a [4, 1M] row sum: 4 x 256; many or
    short rows: the rows kernel."""
    big = _region("func @f(%x: f32[16777216]) -> f32[] {\n  %0 = sum %x {dims=[0]} : f32[]\n"
                  "  return %0\n}")
    assert split_plan(big) == (1, 1024)
    rows = _region("func @f(%x: f32[4,1048576]) -> f32[4] {\n  %0 = sum %x {dims=[1]} : f32[4]\n"
                   "  return %0\n}")
    assert split_plan(rows) == (4, 256)
    many = _region("func @f(%x: f32[4096,1024]) -> f32[4096] {\n"
                   "  %0 = sum %x {dims=[1]} : f32[4096]\n  return %0\n}")
    short = _region("func @f(%x: f32[4,4096]) -> f32[4] {\n  %0 = sum %x {dims=[1]} : f32[4]\n"
                    "  return %0\n}")
    assert split_plan(many) is None and split_plan(short) is None


@pytest.mark.parametrize("dtype", ["bool", "i64", "f64"])
def test_split_integer_bool_and_double_reductions(dtype, small_splits):
    text = (f"func @f(%x: {dtype}[2,700]) -> ({dtype}[2], {dtype}[2]) {{\n"
            f"  %0 = amax %x {{dims=[1]}} : {dtype}[2]\n"
            f"  %1 = amin %x {{dims=[1]}} : {dtype}[2]\n  return %0, %1\n}}")
    fn = _compile(text)
    assert "_c0(" in fn.compiled.sources[0]
    rng = np.random.default_rng(1)
    graph = ir.parse(text)
    arg = (rng.standard_normal((2, 700)) * 100).astype(graph.inputs[0].type.dtype.np)
    check_equals_interpreter(fn, graph, [arg], make_strided=False)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(graphs(max_nodes=4), st.booleans())
def test_split_kernels_equal_the_interpreter_on_random_graphs(case, make_strided):
    """With every reduction of 2+ elements a row split (whatever the graph), over 2 programs.
    Derandomized: a tie of -0 and +0 in amax/amin may give either sign (spec/testing.md,
    Ties), which a later atan2 turns into 0 against pi, split or not."""
    graph, args = case
    note(str(graph))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emit, "SPLIT_MIN_LENGTH", 2)
        mp.setattr(emit, "SPLIT_MIN_CHUNK", 1)
        mp.setattr(emit, "SPLIT_PROGRAMS", 2)
        fn = _compile_graph(graph)
        check_equals_interpreter(fn, graph, args, make_strided)


def _compile_graph(graph):
    return get_backend("triton").compile_graph(graph, {"max_rblock": 2})


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_welford_merge_of_var_rows(offset, small_splits):
    """Note [Welford merge of a split var]: var over 3 long rows, on data far from 0 too
    (the merge must not lose the variance to the mean)."""
    rng = np.random.default_rng(2)
    x = torch.from_numpy((rng.standard_normal((3, 2000)) + offset).astype(np.float32))
    fn = _compile("func @f(%x: f32[3,2000]) -> f32[3] {\n"
                  "  %0 = var %x {dims=[1], correction=0} : f32[3]\n  return %0\n}")
    assert "_w0(" in fn.compiled.sources[0] and "_p1(" not in fn.compiled.sources[0]
    (got,) = fn(x)
    torch.testing.assert_close(got, x.double().var(1, correction=0).float(), rtol=1e-6, atol=0)


def test_welford_merge_of_a_layer_norm_row(small_splits):
    """layer_norm's mean and variance passes merge the same way; its last pass reads both."""
    fn = _compile("""
func @f(%x: f32[1,3000], %w: f32[3000], %b: f32[3000]) -> f32[1,3000] {
  %0 = layer_norm %x, %w, %b {normalized_ndim=1, eps=1e-05} : f32[1,3000]
  return %0
}""")
    assert "_w0(" in fn.compiled.sources[0] and "_p2(" in fn.compiled.sources[0]
    rng = np.random.default_rng(3)
    x, w, b = (torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
               for shape in ((1, 3000), 3000, 3000))
    (got,) = fn(x, w, b)
    torch.testing.assert_close(got, torch.nn.functional.layer_norm(x, (3000,), w, b),
                               rtol=1e-5, atol=1e-5)
