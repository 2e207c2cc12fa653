"""Integer division and remainder by zero raise RuntimeError("ZeroDivisionError") as in
eager, on every backend (spec/correctness.md, "Exceptions"); without a zero they
compute as before."""

import pytest
import torch

import refcomp
from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]

def _across_break(a, b):
    q = a // b
    print("break")
    return q * 2 + a % b


OPS = {
    "across_break": _across_break,
    "floordiv": lambda a, b: a // b,
    "remainder": lambda a, b: a % b + 1,
    "fmod": lambda a, b: torch.fmod(a * 2, b),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor").sum(),
    "inplace": lambda a, b: a.clone().floor_divide_(b),
    "scalar_zero": lambda a, b: a // 0 + b,
    "scalar_zero_rem": lambda a, b: a % 0 + b,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_int_division_by_zero_raises(op, dtype, backend):
    f = OPS[op]

    def zero():  # a zero somewhere in the divisor
        return (torch.arange(1, 7, dtype=dtype).reshape(2, 3),
                torch.tensor([[1, 2, 0], [3, 1, 2]], dtype=dtype))

    def nonzero():
        return (torch.arange(1, 7, dtype=dtype).reshape(2, 3),
                torch.tensor([[1, 2, 5], [3, 1, 2]], dtype=dtype))

    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(*zero())
    assert_like_eager(f, zero, backend)
    if not op.startswith("scalar"):
        assert_like_eager(f, nonzero, backend)
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    if not op.startswith("scalar"):
        torch.testing.assert_close(cf(*nonzero()), f(*nonzero()))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        cf(*zero())  # the cached entry raises too


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_division_by_zero_is_inf(backend):
    f = lambda a, b: (a / b, a // b, a % b)  # noqa: E731
    assert_like_eager(f, lambda: (torch.ones(3), torch.tensor([0.0, 1.0, -0.0])), backend)
