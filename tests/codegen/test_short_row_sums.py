"""Note [Short row sums] (codegen/llvm/emit.py): a row kernel's f32 sum over a short,
static row keeps an f32 accumulator (so LLVM vectorizes the row at f32 width); long
rows, whole-tensor sums and tiled outer sums keep the f64 one (Note [Wide sums])."""

import llvmlite.ir as lir
import numpy as np
import torch

import ir
from codegen.backends import get_backend
from codegen.llvm.emit import EXP_ROW_SUM, SHORT_ROW_SUM, emit_kernel


def _kernels(src):
    fn = get_backend("llvm").compile_graph(ir.parse(src), {})
    return fn, fn.compiled.kernels


def _accumulates_in_double(kernel) -> bool:
    module = lir.Module(name="m")
    emit_kernel(module, kernel, "k")
    return "fpext" in str(module)


def _softmax(n):
    return _kernels(f"""
func @f(%x: f32[6,{n}]) -> f32[6,{n}] {{
  %0 = softmax %x {{dim=1}} : f32[6,{n}]
  return %0
}}""")


def _row_mean(n):
    return _kernels(f"""
func @f(%x: f32[6,{n}]) -> f32[6] {{
  %0 = mean %x {{dims=[1]}} : f32[6]
  return %0
}}""")


def test_short_rows_sum_in_f32_and_long_rows_in_f64():
    for n, wide in ((128, False), (SHORT_ROW_SUM, False), (SHORT_ROW_SUM + 1, True),
                    (65536, True)):
        fn, (kernel,) = _row_mean(n)
        assert _accumulates_in_double(kernel) == wide, n
        x = np.random.default_rng(n).random((6, n)).astype(np.float32)
        (got,) = fn(torch.from_numpy(x))
        want = torch.from_numpy(x).double().mean(-1)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6)


def test_softmax_row_sums_in_f32_up_to_exp_row_sum():
    """A sum of exp below the row max stays f32 for rows of up to EXP_ROW_SUM terms
    (Note [Short row sums]), and is no further from float64 than eager's."""
    for n, wide in ((128, False), (SHORT_ROW_SUM + 1, False), (4096, False),
                    (EXP_ROW_SUM, False), (EXP_ROW_SUM + 1, True)):
        fn, (kernel,) = _softmax(n)
        assert _accumulates_in_double(kernel) == wide, n
        x = torch.from_numpy(np.random.default_rng(n).standard_normal((6, n))
                             .astype(np.float32) * 4)
        (got,) = fn(x)
        truth = torch.softmax(x.double(), -1)
        np.testing.assert_allclose(got.numpy(), truth.numpy(), rtol=2e-6, atol=1e-8)
        ours = (got.double() - truth).norm() / truth.norm()
        eager = (torch.softmax(x, -1).double() - truth).norm() / truth.norm()
        assert ours <= 4 * eager, (n, ours, eager)


def test_whole_and_outer_sums_stay_wide():
    _, (whole,) = _kernels("""
func @f(%x: f32[64]) -> f32[] {
  %0 = sum %x : f32[]
  return %0
}""")
    _, (outer,) = _kernels("""
func @f(%x: f32[64,300]) -> f32[300] {
  %0 = sum %x {dims=[0]} : f32[300]
  return %0
}""")
    assert _accumulates_in_double(whole) and _accumulates_in_double(outer)
