"""Note [exp below the row max] (codegen/llvm/emit.py): softmax's and log_softmax's exp(x -
max x) use vmath.exp_nonpositive; other exps do not; the results are exp's, bit for bit,
on rows with -inf, +inf, NaN, huge and tiny values."""

import numpy as np
import pytest
import torch

import ir
from codegen.backends import get_backend
from codegen.llvm import emit, jit
from codegen.llvm.emit import _plan_below_max


def _compile(text):
    fn = get_backend("llvm").compile_graph(ir.parse(text), {})
    return fn, fn.compiled.kernels


def _rows(op, n=300):
    return f"func @f(%x: f32[7,{n}]) -> f32[7,{n}] {{\n  %0 = {op} %x {{dim=1}} : f32[7,{n}]\n" \
           "  return %0\n}"


@pytest.mark.parametrize("op, count", [("softmax", 2), ("log_softmax", 1)])
def test_softmax_exps_are_planned(op, count):
    _, (kernel,) = _compile(_rows(op))
    assert len(_plan_below_max(kernel)) == count


def test_an_exp_below_another_tensors_max_is_not():
    _, kernels = _compile("""
func @f(%x: f32[7,300], %y: f32[7,300]) -> f32[7,300] {
  %0 = amax %y {dims=[1], keepdim=true} : f32[7,1]
  %1 = expand %0 {shape=[7,300]} : f32[7,300]
  %2 = sub %x, %1 : f32[7,300]
  %3 = exp %2 : f32[7,300]
  return %3
}""")
    assert kernels and all(_plan_below_max(k) == set() for k in kernels)


def _special_rows(n=300):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((7, n)) * 30).astype(np.float32)
    x[0, ::3] = -np.inf
    x[1, 5] = np.inf
    x[2, 7] = np.nan
    x[3, :] = -np.inf
    x[4, ::2] = -1e30
    x[5, :] = rng.uniform(-200, 0, n)
    x[6, :] = 3e38
    return torch.from_numpy(x)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_same_bits_as_exp(op, monkeypatch):
    x = _special_rows()
    fn, _ = _compile(_rows(op))
    (planned,) = fn(x)
    monkeypatch.setattr(jit, "_cache", {})
    monkeypatch.setattr(emit, "_plan_below_max", lambda k: set())
    fn_exp, _ = _compile(_rows(op))
    (plain,) = fn_exp(x)
    # the same bits, NaN where NaN (a NaN's sign and payload are not compared: with the
    # exp planned, the row max is Note [Row max of a softmax]'s, and a NaN row's NaN
    # comes from the sum rather than from the max)
    assert torch.equal(planned.isnan(), plain.isnan())
    ok = ~planned.isnan()
    assert torch.equal(planned[ok].view(torch.int32), plain[ok].view(torch.int32))
    want = getattr(torch, op)(x, 1)
    torch.testing.assert_close(planned, want, equal_nan=True)
