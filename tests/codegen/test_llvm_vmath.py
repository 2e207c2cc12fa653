"""Accuracy of the vectorized f32 transcendentals (codegen/llvm/vmath.py) against float64 numpy,
and that loops using them do vectorize.  The bounds here are the ones spec/codegen.md
("Numerics") documents.
"""

import math

import numpy as np
import pytest
import torch

import ir
from codegen.backends import get_backend
from codegen.llvm import jit

N = 100_000
_erf = np.vectorize(math.erf)

# name: (sampler, float64 reference, max error in f32 ulps of the exact result)
CASES = {
    "exp": (lambda r: r.uniform(-87, 88.7, N), np.exp, 2),
    "log": (lambda r: np.exp(r.uniform(-87, 88, N)), np.log, 2),
    "tanh": (lambda r: r.uniform(-10, 10, N), np.tanh, 2),
    "sigmoid": (lambda r: r.uniform(-80, 80, N), lambda x: 1 / (1 + np.exp(-x)), 3),
    "erf": (lambda r: r.uniform(-5, 5, N), _erf, 1.5),
}
SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-3, -1e-3, 1e-39], np.float32)


def _unary(name, n):
    text = f"func @f(%x: f32[{n}]) -> f32[{n}] {{\n  %0 = {name} %x : f32[{n}]\n  return %0\n}}"
    return get_backend("llvm").compile_graph(ir.parse(text), {})


@pytest.mark.parametrize("name", sorted(CASES))
def test_accuracy_in_ulps_and_vectorized(name):
    sample, ref, max_ulps = CASES[name]
    x = sample(np.random.default_rng(0)).astype(np.float32)
    fn = _unary(name, N)
    assert any(f"<{n} x float>" in jit.optimized_ir() for n in (4, 8, 16))
    got = fn(torch.from_numpy(x))[0].numpy().astype(np.float64)
    want = ref(x.astype(np.float64))
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    ulp = np.spacing(np.abs(want[normal]).astype(np.float32)).astype(np.float64)
    errors = np.abs(got[normal] - want[normal]) / ulp
    assert errors.max() <= max_ulps, f"{name}: {errors.max():.2f} ulp"


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_match_libm(name):
    _, ref, _ = CASES[name]
    got = _unary(name, len(SPECIALS))(torch.from_numpy(SPECIALS))[0].numpy()
    with np.errstate(all="ignore"):
        want = ref(SPECIALS.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-37, equal_nan=True)


def test_exp_flushes_underflow_to_zero_and_is_exact_above():
    """Note [exp underflows to 0]: below vmath.EXP_MIN (where exp is under FLT_MIN) exp is 0,
    never a denormal; from EXP_MIN up results are normal numbers within 2 ulp."""
    from codegen.llvm.vmath import EXP_MIN

    tiny = np.finfo(np.float32).tiny
    low = np.float32(EXP_MIN)
    assert math.exp(float(low)) >= tiny > math.exp(float(np.nextafter(low, np.float32(-1e9))))
    below = np.array([-np.inf, -1e30, -1e4, -150.0, -104.0, -100.0, -95.0, -88.0,
                      np.nextafter(low, np.float32(-1e9))], np.float32)
    above = np.concatenate([[low], np.random.default_rng(1).uniform(EXP_MIN, -80, N - len(below) - 1)])
    x = np.concatenate([below, above]).astype(np.float32)
    got = _unary("exp", N)(torch.from_numpy(x))[0].numpy()
    assert np.array_equal(got[:len(below)], np.zeros(len(below), np.float32))
    rest = got[len(below):].astype(np.float64)
    assert (rest >= tiny).all()
    want = np.exp(x[len(below):].astype(np.float64))
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert (np.abs(rest - want) / ulp).max() <= 2


def test_erf_has_no_division_and_is_exact_at_its_seams():
    """Note [erf without a division]: the erf loop divides nothing (the former large
    branch's 1 / |x| was a vdivps a vector), and both sides of the branch split, the
    clamp at 4 and the range where erf rounds to +-1 are within the bound."""
    from codegen.llvm import vmath

    split = np.float32(vmath.ERF_SPLIT)
    around = [np.nextafter(split, np.float32(0)), split, np.nextafter(split, np.float32(9))]
    x = np.array(around + [3.83, 3.9, 3.92, 3.99, 4.0, 4.01, 10.0, 1e30], np.float32)
    x = np.concatenate([x, -x])
    fn = _unary("erf", len(x))
    assert "fdiv" not in jit.optimized_ir()
    got = fn(torch.from_numpy(x))[0].numpy()
    want = _erf(x.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - want) / ulp).max() <= 1.5
    assert (got[np.abs(x) >= 3.92] == np.sign(x[np.abs(x) >= 3.92])).all()
