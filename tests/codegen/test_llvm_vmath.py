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
    "erf": (lambda r: r.uniform(-5, 5, N), _erf, 3),
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
    assert "<8 x float>" in jit.optimized_ir() or "<4 x float>" in jit.optimized_ir()
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
