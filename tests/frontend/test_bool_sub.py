"""Subtraction with a bool (a Python bool or a bool tensor) raises RuntimeError as in
eager, where the IR-typed meta shortcut once computed it (fuzz finding
bool_scalar_subtraction; spec/correctness.md, "Exceptions")."""

import pytest
import torch

from tests.frontend.eager_diff import assert_like_eager

CASES = {
    "rsub_bool_scalar": lambda x, b: True - x,
    "sub_bool_scalar": lambda x, b: x - True,
    "sub_bool_tensor": lambda x, b: x - b,
    "bool_tensor_sub": lambda x, b: b - x,
    "torch_sub_alpha": lambda x, b: torch.sub(x, b, alpha=2),
    "inplace_sub": lambda x, b: x.sub_(b),
    "bool_tensor_plus_is_fine": lambda x, b: (b + x, x * b, x / (b + 1)),
}


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bool_subtraction_as_eager(case, backend):
    assert_like_eager(CASES[case], lambda: (torch.randn(3), torch.tensor([True, False, True])),
                      backend)
