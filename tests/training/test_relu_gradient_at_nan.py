"""relu's gradient at a NaN is the incoming gradient, as ATen's threshold_backward
(`out <= 0 ? 0 : g`) gives it; refcomp gave 0 (found while testing max_pool2d's
kernels, session 17; spec/correctness.md, "Values eager makes that are easy to change")."""

import pytest
import torch

import refcomp


def _step(x, w):
    return (torch.relu(x) * w).sum()


@pytest.mark.parametrize("backend", ["llvm", "eager"])
def test_relu_gradient_at_nan_equals_eager(backend):
    x = torch.tensor([float("nan"), 1.0, -1.0, 0.0, -0.0, float("inf"), float("-inf")])
    w = torch.arange(1.0, 8.0)
    grads = []
    for fn in (_step, refcomp.compile(_step, backend=backend)):
        xx = x.clone().requires_grad_()
        fn(xx, w).backward()
        grads.append(xx.grad)
    assert torch.equal(grads[1], grads[0]), grads
    assert grads[0][0] == 1.0
