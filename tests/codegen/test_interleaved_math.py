"""Note [Interleaved vector math] (codegen/llvm/emit.py): an innermost loop whose body has
vector math (vmath.py) asks the loop vectorizer for several independent vectors per
iteration; loops without it, and short static loops, do not; and the results are the same
bits as without the hint, on every length (the main loop, the narrower epilogue and the
scalar remainder)."""

import llvmlite.ir as lir
import numpy as np
import pytest
import torch

import ir
from codegen.backends import get_backend
from codegen.llvm import emit, jit
from codegen.llvm.emit import INTERLEAVE_MATH, INTERLEAVE_ROW, MATH_VECTOR, emit_kernel


def _compile(src):
    fn = get_backend("llvm").compile_graph(ir.parse(src), {})
    return fn, fn.compiled.kernels


def _hints(kernel) -> list[int]:
    """The interleave counts the emitted kernel asks for, one per hinted loop."""
    module = lir.Module(name="m")
    emit_kernel(module, kernel, "k")
    text = str(module)
    counts = []
    for line in text.splitlines():
        if '"llvm.loop.interleave.count"' in line:
            counts.append(int(line.rsplit("i32", 1)[1].strip(" }")))
    assert text.count('!llvm.loop') == len(counts)
    return counts


def _chain(n):
    return f"""
func @f(%x: f32[{n}], %y: f32[{n}]) -> f32[{n}] {{
  %0 = sigmoid %x : f32[{n}]
  %1 = mul %0, %y : f32[{n}]
  %2 = tanh %1 : f32[{n}]
  %3 = erf %2 : f32[{n}]
  %4 = exp %3 : f32[{n}]
  return %4
}}"""


def test_a_pointwise_loop_with_vector_math_is_interleaved():
    _, (kernel,) = _compile(_chain(4096))
    assert _hints(kernel) == [INTERLEAVE_MATH]


def test_loops_without_vector_math_are_left_to_llvm():
    _, (kernel,) = _compile("""
func @f(%x: f32[4096], %y: f32[4096]) -> f32[4096] {
  %0 = mul %x, %y : f32[4096]
  %1 = add %0, %x : f32[4096]
  return %1
}""")
    assert _hints(kernel) == []


@pytest.mark.parametrize("n, count", [(1024, INTERLEAVE_ROW), (2 * 4 * MATH_VECTOR - 1, 2),
                                      (128, 4), (64, 2), (63, 0), (16, 0)])
def test_short_static_rows_ask_for_fewer(n, count):
    """softmax's exp pass over rows of n: at most INTERLEAVE_ROW, and each interleaved
    vector gets two iterations."""
    _, (kernel,) = _compile(f"""
func @f(%x: f32[6,{n}]) -> f32[6,{n}] {{
  %0 = softmax %x {{dim=1}} : f32[6,{n}]
  return %0
}}""")
    hints = _hints(kernel)
    assert hints == ([count] if count else []), hints
    assert all(h <= INTERLEAVE_ROW for h in hints)


def test_hinted_loops_ask_for_full_width_vectors_with_avx512():
    """Note [Vector width of math loops]: the hint carries MATH_VECTOR lanes on an AVX-512
    host (LLVM picked 8 for softmax rows of 4096), and no width elsewhere."""
    _, (kernel,) = _compile("""
func @f(%x: f32[6,4096]) -> f32[6,4096] {
  %0 = softmax %x {dim=1} : f32[6,4096]
  return %0
}""")
    module = lir.Module(name="m")
    emit_kernel(module, kernel, "k")
    widths = [int(line.rsplit("i32", 1)[1].strip(" }")) for line in str(module).splitlines()
              if '"llvm.loop.vectorize.width"' in line]
    assert widths == ([MATH_VECTOR] if jit.host_has_avx512() else [])


@pytest.mark.parametrize("n", [1, 15, 17, 127, 129, 1000, 4099])
def test_interleaving_changes_no_bit(n, monkeypatch):
    rng = np.random.default_rng(n)
    x = torch.from_numpy((rng.standard_normal(n) * 4).astype(np.float32))
    y = torch.from_numpy((rng.standard_normal(n) * 4).astype(np.float32))
    x[::7] = float("nan")
    fn, _ = _compile(_chain(n))
    (hinted,) = fn(x, y)
    monkeypatch.setattr(jit, "_cache", {})  # compile again, not from the kernel cache
    monkeypatch.setattr(emit, "INTERLEAVE_MATH", 1)
    fn1, (kernel,) = _compile(_chain(n))
    assert _hints(kernel) == []
    (plain,) = fn1(x, y)
    assert torch.equal(hinted.view(torch.int32), plain.view(torch.int32))
    want = torch.exp(torch.erf(torch.tanh(torch.sigmoid(x) * y)))
    torch.testing.assert_close(hinted, want, equal_nan=True)
