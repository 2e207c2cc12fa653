"""Note [Row max of a softmax] (codegen/llvm/emit.py): where every output that depends on a
row's max m also depends, through NaN-propagating operations, on the row's sum of
exp(x - m), m is vmaxps over 16-lane vectors (AVX-512) and need not propagate NaN: a NaN
element makes that sum NaN.  Results are the keyed max's bit for bit, NaN rows included;
a max that reaches an output any other way keeps the keyed, NaN-propagating max."""

import numpy as np
import pytest
import torch

import ir
import refcomp
from codegen.backends import get_backend
from codegen.llvm import emit, jit

OPS = ["softmax", "log_softmax"]
NAN, INF = float("nan"), float("inf")


def _graph(op, rows, n):
    return ir.parse(f"func @f(%x: f32[{rows},{n}]) -> f32[{rows},{n}] {{\n"
                    f"  %0 = {op} %x {{dim=1}} : f32[{rows},{n}]\n  return %0\n}}")


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((12, n)) * 4).astype(np.float32)
    x[0, -1] = 50.0                        # the max in the scalar tail (n % 16 elements)
    x[1, -1] = NAN                         # a NaN in the tail
    x[2, 0] = np.copysign(np.float32(NAN), -1)   # a negative NaN (vmaxps passes it over)
    x[3, n // 2] = np.copysign(np.float32(NAN), -1)
    x[4, :] = NAN
    x[5, :] = -INF
    x[6, ::2] = -INF                       # a causal-mask-like row
    x[7, -1] = INF
    x[8, :] = -0.0                         # +0 and -0 as the max: either gives the same bits
    x[8, n // 3] = 0.0
    x[9, :] = -1e30
    x[9, -1] = 0.0
    x[10, :] = -0.0
    x[11, ::3] = -200.0
    return torch.from_numpy(x)


def _bits_equal(a, b):
    assert torch.equal(a.isnan(), b.isnan())
    ok = ~a.isnan()
    assert torch.equal(a[ok].view(torch.int32), b[ok].view(torch.int32))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [16, 17, 100, 129, 1024, 1025, 4099])
def test_vector_max_gives_the_keyed_max_bits(op, n, monkeypatch):
    x = _rows(n, n)
    fn = get_backend("llvm").compile_graph(_graph(op, 12, n), {})
    (kernel,) = fn.compiled.kernels
    planned = emit._plan_vector_max(kernel, emit._plan_below_max(kernel))
    assert bool(planned) == jit.host_has_avx512()
    (got,) = fn(x)
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(emit, "_plan_vector_max", lambda *a: {})
    (keyed,) = get_backend("llvm").compile_graph(_graph(op, 12, n), {})(x)
    _bits_equal(got, keyed)
    want = getattr(torch, op)(x, 1)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, equal_nan=True)


def _max_out(x):
    m = x.amax(-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(-1, keepdim=True), m


def _max_in_a_select(x):
    m = x.amax(-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(-1, keepdim=True), torch.where(x > m - 1, x, 0.0)


@pytest.mark.parametrize("fn", [_max_out, _max_in_a_select])
def test_a_max_reaching_an_output_otherwise_propagates_nan(fn, monkeypatch):
    """The max is stored, or read by a compare: no sum makes those outputs NaN, so the
    kernel keeps the keyed max (a negative NaN must win there as well)."""
    captured = []
    import codegen.llvm.backend as backend

    compile_kernels = backend.compile_kernels
    monkeypatch.setattr(backend, "compile_kernels",
                        lambda ks: (captured.extend(ks), compile_kernels(ks))[1])
    x = torch.randn(4, 64)
    x[1, 5] = NAN
    x[2, 63] = np.copysign(np.float32(NAN), -1).item()
    x[3, 0] = np.copysign(np.float32(NAN), -1).item()
    got = refcomp.compile(fn, backend="llvm")(x)
    for g, w in zip(got, fn(x)):
        assert torch.equal(g.isnan(), w.isnan())
        torch.testing.assert_close(g, w, equal_nan=True)
    (kernel,) = captured
    assert len(kernel.accs) == 2  # one kernel: the max, the sum
    assert emit._plan_vector_max(kernel, emit._plan_below_max(kernel)) == {}


@pytest.mark.parametrize("shape", [(1024, 4096), (4096, 1024)])
def test_big_rows_equal_eager(shape):
    x = torch.randn(*shape) * 3
    x[7, 100] = NAN
    x[9, :] = -INF
    x[11, ::2] = -INF
    for op in OPS:
        (got,) = get_backend("llvm").compile_graph(_graph(op, *shape), {})(x)
        want = getattr(torch, op)(x, 1)
        assert torch.equal(got.isnan(), want.isnan())
        torch.testing.assert_close(got, want, equal_nan=True)


def test_next_rows_max_is_planned_for_softmax_not_log_softmax():
    """Note [Next row's max]: softmax's last stage reads its exp row from the row scratch,
    log_softmax's reads x again (measured slower one row ahead)."""
    for op, expected in (("softmax", True), ("log_softmax", False)):
        (kernel,) = get_backend("llvm").compile_graph(_graph(op, 8, 1024), {}).compiled.kernels
        vector_max = emit._plan_vector_max(kernel, emit._plan_below_max(kernel))
        ahead = emit._max_ahead(kernel, vector_max, emit._plan_reuse(kernel)[0])
        assert ahead == (expected and jit.host_has_avx512()), op


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("n", [17, 1024])
@pytest.mark.parametrize("threads", [1, 2])
def test_next_rows_max_gives_the_same_bits(rows, n, threads, monkeypatch):
    """The max found one row ahead (before the loop for the first row of each thread's
    range, none after the last row) is the row's own: same bits as finding it in place,
    with the rows split between threads too."""
    x = torch.from_numpy((np.random.default_rng(rows * n).standard_normal((rows, n)) * 6)
                         .astype(np.float32))
    x[rows // 2, n // 3] = NAN
    x[-1, :] = -INF if rows > 1 else x[-1, :]
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    (ahead,) = get_backend("llvm").compile_graph(_graph("softmax", rows, n), {})(x)
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(emit, "_max_ahead", lambda *a: False)
    (in_place,) = get_backend("llvm").compile_graph(_graph("softmax", rows, n), {})(x)
    _bits_equal(ahead, in_place)
    want = torch.softmax(x, 1)
    assert torch.equal(ahead.isnan(), want.isnan())
    torch.testing.assert_close(ahead, want, equal_nan=True)


@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax])
def test_explicit_vector_loops_print_no_llvm_remark(op, capfd, monkeypatch):
    """A loop whose body is explicit vector code gets no vectorizer hint: hinted, LLVM
    could not widen it and printed "remark: loop not vectorized: instruction return type
    cannot be vectorized" on the user's stderr (log_softmax [1024, 2048])."""
    monkeypatch.setenv("REFCOMP_CACHE", "0")  # compile, not load from the disk cache
    x = torch.randn(1024, 2048)
    refcomp.reset()
    torch.testing.assert_close(refcomp.compile(lambda t: op(t, -1), backend="llvm")(x),
                               op(x, -1))
    assert "not vectorized" not in capfd.readouterr().err
