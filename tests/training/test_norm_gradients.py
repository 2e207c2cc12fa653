"""Vector norms' gradients where the norm is 0 (spec/autograd.md; corpus
grad_norm_of_zeros): ATen's norm_backward masks them to 0 where refcomp's decomposition
(a root of a sum of powers) would give inf * 0 = NaN."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import refcomp

NORMS = {
    "norm": lambda x: x.norm(),
    "norm_dim": lambda x: (x * 2).norm(dim=-1),
    "p3": lambda x: torch.linalg.vector_norm(x, 3, dim=-1),
    "p1.5": lambda x: torch.linalg.vector_norm(x, 1.5),
    "p1": lambda x: torch.linalg.vector_norm(x, 1),
    "inf": lambda x: torch.linalg.vector_norm(x, float("inf")),
    "normalize": lambda x: F.normalize(x, dim=-1),
    "half": lambda x: x.half().norm().float(),
}


@pytest.fixture(autouse=True)
def fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def _grad(fn, values):
    x = values.clone().requires_grad_()
    (g,) = torch.autograd.grad(fn(x).sum(), x)
    return g


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name", NORMS)
@pytest.mark.parametrize("values", ["zeros", "one_zero_row"])
def test_norm_gradient_where_the_norm_is_zero(backend, name, values):
    x = torch.zeros(2, 3) if values == "zeros" else torch.tensor([[0.0, 0, 0],
                                                                  [1.0, -2, 0.5]])
    fn = NORMS[name]
    want = _grad(fn, x)
    got = _grad(refcomp.compile(fn, backend=backend), x)
    assert not got.isnan().any(), got
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_norm_gradient_with_p_below_one_runs_atens_norm():
    # The decomposition is refused (ATen also masks |x|^(p-1) where x is 0), so the call
    # is an opaque ATen node: ATen's norm and its backward.
    def fn(x):
        return torch.linalg.vector_norm(x, 0.5)

    x = torch.tensor([0.0, 1.0, 4.0])
    text = str(refcomp.explain(fn)(x.clone().requires_grad_()))
    assert "Graph 1: aten x1" in text, text
    torch.testing.assert_close(_grad(refcomp.compile(fn, backend="llvm"), x), _grad(fn, x))
