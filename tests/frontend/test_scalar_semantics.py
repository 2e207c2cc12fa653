"""Python numbers meeting tensors as eager handles them (found by probing small programs
on every backend; each was a wrong answer or a wrong exception)."""

import pytest
import torch

import refcomp
from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_tensor_with_a_python_number_computes_in_float32_as_eager(backend, dtype):
    """Note [Half scalars]: 0 * 1e5 was NaN (1e5 rounded to a half inf first) and 0.1 was
    rounded to half before the multiply; eager keeps the number in float32 for mul and
    div, and rounds it to half for add and sub (60000 - 70000 is -inf)."""
    def f(x):
        return x * 1e5, x * 0.1 + 7.0, x / 3.3, x - 70000.0, 2.5 * x, x + 0.1, 0.3 * x

    x = torch.tensor([0.0, 3.25, -7.5, 1e-3, 60000.0, 3.0, 7.0, 1000.0], dtype=dtype)
    refcomp.reset()
    got, want = refcomp.compile(f, backend=backend)(x), f(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g.isnan(), w.isnan())
        assert torch.equal(g.nan_to_num(), w.nan_to_num())  # bitwise, infinities included


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_tensor_to_a_negative_python_power_raises_as_eager(backend):
    assert_like_eager(lambda x: x ** -1, lambda: (torch.tensor([1, 2, -1]),), backend)
    assert_like_eager(lambda x: torch.pow(x, -2) + 1, lambda: (torch.tensor([3, 1]),),
                      backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_powers_with_negative_tensor_exponents_equal_eager(backend):
    """A tensor exponent is allowed (0 for |base| > 1, 1 or -1 for base +-1); numpy
    refused it in the interpreter."""
    assert_like_eager(lambda b, e: b ** e, lambda: (torch.tensor([2, 1, -1, 0, -1, 5, -3]),
                                                    torch.tensor([-1, -1, -1, -1, -2, -3, 2])),
                      backend)
