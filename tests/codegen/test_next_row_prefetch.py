"""Note [Next-row prefetch] (codegen/llvm/emit.py): a row kernel of several stages
prefetches the next row of what its first stage reads, before its last stage; only rows
of PREFETCH_MIN_BYTES..PREFETCH_MAX_BYTES, and the results are unchanged."""

import llvmlite.ir as lir
import numpy as np
import torch

import ir
from codegen.backends import get_backend
from codegen.llvm.emit import PREFETCH_MAX_BYTES, PREFETCH_MIN_BYTES, emit_kernel


def _compile(src):
    fn = get_backend("llvm").compile_graph(ir.parse(src), {})
    return fn, fn.compiled.kernels


def _prefetches(kernel) -> int:
    module = lir.Module(name="m")
    emit_kernel(module, kernel, "k")
    return str(module).count("call void @\"llvm.prefetch")


def _softmax(rows, n):
    return _compile(f"""
func @f(%x: f32[{rows},{n}]) -> f32[{rows},{n}] {{
  %0 = softmax %x {{dim=1}} : f32[{rows},{n}]
  return %0
}}""")


def test_softmax_rows_of_a_page_prefetch_the_next_row_and_stay_exact():
    for n, expected in ((PREFETCH_MIN_BYTES // 4 - 1, False), (PREFETCH_MIN_BYTES // 4, True),
                        (1024, True), (PREFETCH_MAX_BYTES // 4, True),
                        (PREFETCH_MAX_BYTES // 4 + 1, False)):
        fn, (kernel,) = _softmax(5, n)
        assert (_prefetches(kernel) == 1) == expected, n
        x = torch.from_numpy(np.random.default_rng(n).standard_normal((5, n)).astype(np.float32))
        (got,) = fn(x)  # the last row's prefetch points past the input: harmless
        torch.testing.assert_close(got, torch.softmax(x, 1))


def test_single_stage_and_strided_rows_do_not_prefetch():
    _, (kernel,) = _compile("""
func @f(%x: f32[64,1024]) -> f32[64,1024] {
  %0 = mul %x, %x : f32[64,1024]
  return %0
}""")
    assert _prefetches(kernel) == 0
    _, (kernel,) = _compile("""
func @f(%x: f32[1024,64]) -> f32[1024,64] {
  %0 = softmax %x {dim=0} : f32[1024,64]
  return %0
}""")
    assert _prefetches(kernel) == 0
