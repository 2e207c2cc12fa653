"""softmax and log_softmax rows on the llvm backend against eager (issue 38): row lengths
that hit every loop of the row kernel (vector main loops, interleaved and narrower
remainders, the scalar tail; row reuse, streamed stores with aligned and misaligned rows,
the next-row prefetch), special values, empty shapes; and no further from float64 than
eager (the 4x rule, Note [Accuracy check] in bench/harness.py)."""

import numpy as np
import pytest
import torch

import ir
from codegen.backends import get_backend

OPS = ["softmax", "log_softmax"]


def _compile(op, rows, n):
    return get_backend("llvm").compile_graph(ir.parse(
        f"func @f(%x: f32[{rows},{n}]) -> f32[{rows},{n}] {{\n"
        f"  %0 = {op} %x {{dim=1}} : f32[{rows},{n}]\n  return %0\n}}"), {})


def _rel_error(got, want64):
    ok = torch.isfinite(want64)
    return ((got.double() - want64)[ok].norm() / want64[ok].norm().clamp_min(1e-300)).item()


def _check(op, x):
    (got,) = _compile(op, *x.shape)(x)
    want = getattr(torch, op)(x, 1)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.equal(got.isnan(), want.isnan())
    truth = getattr(torch, op)(x.double(), 1)
    assert _rel_error(got, truth) <= 4 * _rel_error(want, truth) + 1e-7
    return got


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 2, 15, 17, 63, 129, 1000, 1025, 4099])
def test_odd_row_lengths(op, n):
    x = torch.from_numpy((np.random.default_rng(n).standard_normal((6, n)) * 5)
                         .astype(np.float32))
    _check(op, x)


@pytest.mark.parametrize("op", OPS)
def test_streamed_rows_aligned_and_not(op):
    """An output of >= 8 MB is streamed (Note [Streaming stores]); rows of 1025 f32 start
    at 32-byte aligned addresses only every 8th row, the others take the plain copy."""
    x = torch.from_numpy((np.random.default_rng(1).standard_normal((2050, 1025)) * 3)
                         .astype(np.float32))
    _check(op, x)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [7, 1024])
def test_special_rows(op, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((9, n)) * 10).astype(np.float32)
    x[0, :] = -np.inf                 # all -inf: NaN in eager
    x[1, ::2] = -np.inf               # a causal-mask-like row
    x[2, n // 2] = np.nan             # one NaN: the whole row is NaN
    x[3, 0] = -np.nan                 # a negative NaN first
    x[4, -1] = np.inf                 # +inf: NaN where x is inf too, 0 elsewhere
    x[5, :] = np.float32(3e38)        # huge and equal
    x[6, :] = -1e30                   # far below any exp range, all equal
    x[7, ::3] = -200.0                # exp(x - max) under FLT_MIN: 0 (or its log)
    x[8, :] = 0.0
    x[8, ::2] = -0.0
    _check(op, torch.from_numpy(x))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(5, 0), (0, 7), (0, 0)])
def test_empty(op, shape):
    import refcomp

    x = torch.randn(*shape)
    fn = getattr(torch, op)
    got = refcomp.compile(lambda t: fn(t, -1), backend="llvm")(x)
    want = fn(x, -1)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("op", OPS)
def test_unclamped_lanes_give_the_clamped_bits(op, monkeypatch):
    """Note [Masked flush below the row max] (vmath.py): with AVX-512 the exp below the row
    max has no low clamp; lanes below EXP_MIN, where 2^n by a shift is garbage (x - max
    near -265 or -442 makes it a denormal factor), are flushed to the same 0."""
    from codegen.llvm import jit, vmath

    rng = np.random.default_rng(3)
    x = np.zeros((6, 515), np.float32)
    for i, (lo, hi) in enumerate([(-265.2, -264.4), (-442.5, -442.0), (-100, -86),
                                  (-620, -600), (-90, 0), (-1e30, -1e29)]):
        x[i, 1:] = rng.uniform(lo, hi, 514)
    x = torch.from_numpy(x)
    (got,) = _compile(op, 6, 515)(x)
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(vmath, "_has_scalef", lambda: False)
    (clamped,) = _compile(op, 6, 515)(x)
    assert torch.equal(got.view(torch.int32), clamped.view(torch.int32))
    torch.testing.assert_close(got, getattr(torch, op)(x, 1))


LAYER_NORM = """
func @f(%x: f32[{rows},{n}], %w: f32[{n}], %b: f32[{n}]) -> f32[{rows},{n}] {{
  %0 = layer_norm %x, %w, %b {{normalized_ndim=1, eps=1e-5}} : f32[{rows},{n}]
  return %0
}}"""


@pytest.mark.parametrize("op", OPS + ["layer_norm"])
@pytest.mark.parametrize("rows, n", [(37, 301), (9, 1024), (5, 48)])
def test_vector_streamed_stage_equals_the_scalar_stage(op, rows, n, monkeypatch):
    """Note [Vector streamed stage] (emit.py): the streamed last stage in explicit vectors,
    stored straight to the output, gives the results of the scalar stage and copy; rows of
    301 f32 are 64-byte aligned only every 16th row (the others run the scalar body), and
    leave a 13-element tail."""
    from codegen.llvm import emit, jit

    monkeypatch.setattr(emit, "STREAM_MIN_BYTES", 0)
    text = LAYER_NORM.format(rows=rows, n=n) if op == "layer_norm" else (
        f"func @f(%x: f32[{rows},{n}]) -> f32[{rows},{n}] {{\n"
        f"  %0 = {op} %x {{dim=1}} : f32[{rows},{n}]\n  return %0\n}}")
    rng = np.random.default_rng(n)
    args = [torch.from_numpy((rng.standard_normal(s) * 3).astype(np.float32))
            for s in ([(rows, n), (n,), (n,)] if op == "layer_norm" else [(rows, n)])]
    fn = get_backend("llvm").compile_graph(ir.parse(text), {})
    (kernel,) = fn.compiled.kernels
    module = jit.new_module("m")  # the host triple: streams are planned on x86 only
    emit.emit_kernel(module, kernel, "k")
    assert ("r0.vec.cond" in str(module)) == jit.host_has_avx512()
    (got,) = fn(*args)
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(emit, "_vector_stage", lambda *a: False)
    (scalar,) = get_backend("llvm").compile_graph(ir.parse(text), {})(*args)
    # the same per-element operations; the row sums (reassociable) may be grouped
    # differently by LLVM in the two kernels (seen for rows of 48, and once for 1024 in
    # a full run of tests/codegen), so within a rounding of the sum
    torch.testing.assert_close(got, scalar, rtol=2e-6, atol=1e-6)
    want = (torch.nn.functional.layer_norm(args[0], (n,), args[1], args[2]) if op == "layer_norm"
            else getattr(torch, op)(args[0], 1))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_row_scratch_is_64_byte_aligned():
    """Note [Row reuse]: softmax's exp row is stored and reloaded in 16-lane vectors; the
    scratch is 64-byte aligned so that no vector access splits a cache line."""
    import re

    import llvmlite.ir as lir

    from codegen.llvm.emit import emit_kernel

    (kernel,) = _compile("softmax", 4, 1024).compiled.kernels
    module = lir.Module(name="m")
    emit_kernel(module, kernel, "k")
    rows = re.findall(r'%"row\d+" = alloca \[1024 x float\](.*)', str(module))
    assert rows and all("align 64" in r for r in rows), rows
