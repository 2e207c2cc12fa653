"""`t.is_leaf` in traced code answers as eager's (`grad_fn is None`): a traced result's
meta tensor is built as a leaf, so `(x * 2).is_leaf` read True for an x that requires
grad (found by the mutation run of issue 19)."""

import pytest
import torch

from tests.frontend.eager_diff import assert_like_eager


def leafiness(x, w):
    y = x * 2
    d = torch.diagonal(x)
    v = x.view(-1)
    return (y.is_leaf, d.is_leaf, v.is_leaf, x.is_leaf, w.is_leaf, x.detach().is_leaf,
            (y * 0).is_leaf, y.requires_grad, d.requires_grad)


def make(non_leaf=False):
    def args():
        x = torch.randn(3, 3, requires_grad=True)
        return (x * 1 if non_leaf else x), torch.nn.Parameter(torch.randn(2))
    return args


@pytest.mark.parametrize("backend", ["eager", "llvm"])
@pytest.mark.parametrize("non_leaf", [False, True])
@pytest.mark.parametrize("grad", [True, False])
def test_is_leaf_answers_as_eager(backend, non_leaf, grad):
    with torch.set_grad_enabled(grad):
        assert_like_eager(leafiness, make(non_leaf), backend)
