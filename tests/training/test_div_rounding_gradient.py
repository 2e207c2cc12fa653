"""`torch.div(a, b, rounding_mode="floor")` under autograd runs as eager (a zero
gradient) where refcomp raised "derivative for aten::floor_divide is not implemented";
`torch.floor_divide` itself still raises at backward, as eager does (issue 35)."""

import pytest
import torch

import refcomp


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_floor_division_with_rounding_mode_has_eagers_gradient(backend):
    def f(a, b):
        return torch.div(a, b, rounding_mode="floor") * a

    a = torch.randn(5, requires_grad=True)
    b = torch.rand(5) + 0.5
    refcomp.reset()
    refcomp.compile(f, backend=backend)(a, b).sum().backward()
    got, a.grad = a.grad, None
    f(a, b).sum().backward()
    torch.testing.assert_close(got, a.grad)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_floor_divide_backward_raises_as_eager(backend):
    def f(a, b):
        return torch.floor_divide(a, b) * 2

    a, b = torch.randn(3, requires_grad=True), torch.ones(3)
    with pytest.raises(RuntimeError, match="floor_divide") as eager:
        f(a, b).sum().backward()
    refcomp.reset()
    with pytest.raises(RuntimeError, match="floor_divide") as compiled:
        refcomp.compile(f, backend=backend)(a, b).sum().backward()
    assert str(compiled.value) == str(eager.value)
