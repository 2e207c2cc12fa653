"""Known torch bug (spec/correctness.md, "Known torch bugs"): torch 2.13's CPU
`F.batch_norm(training=True)` backward is wrong for an input that is channels-last
contiguous with a size-1 dim of another stride than the canonical one.  refcomp's
gradient is the formula's on every CPU backend; the gradient fuzzer does not draw that
case (tests/fuzz/gen.py, `_ambiguous_channels_last`), since eager's answer is no oracle.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import refcomp
from tests.fuzz.gen import _ambiguous_channels_last


def _input():
    g = torch.Generator().manual_seed(0)
    flat = torch.randn(12, generator=g)
    return torch.as_strided(flat, (1, 3, 1, 4), (1, 1, 3, 3))  # a permuted input's strides


def _grad(fn, x, w):
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad((fn(x).double() * w).sum(), [x])
    return g.double()


def _formula(x):  # the float64 truth
    m = x.mean(dim=(0, 2, 3), keepdim=True)
    v = x.var(dim=(0, 2, 3), correction=0, keepdim=True)
    return (x - m) / torch.sqrt(v + 1e-5)


def bn(x):
    return F.batch_norm(x, None, None, training=True)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_refcomp_gets_the_formulas_gradient_where_eager_does_not(backend):
    x = _input()
    assert _ambiguous_channels_last(x)
    w = torch.linspace(-1, 2, 12, dtype=torch.float64).reshape(1, 3, 1, 4)
    truth = _grad(_formula, x.double(), w)
    refcomp.reset()
    got = _grad(refcomp.compile(bn, backend=backend), x, w)
    torch.testing.assert_close(got, truth, rtol=1e-4, atol=1e-4)
    # torch's own bug: if this fails, torch fixed it -- drop the generator's exclusion
    assert (_grad(bn, x, w) - truth).abs().max() > 0.1
    assert (_grad(bn, x.contiguous(), w) - truth).abs().max() < 1e-4


def test_the_exclusion_is_narrow():
    x = torch.randn(2, 3, 4, 5)
    assert not _ambiguous_channels_last(x)
    assert not _ambiguous_channels_last(x.contiguous(memory_format=torch.channels_last))
    assert not _ambiguous_channels_last(x.transpose(2, 3))


def test_the_exclusion_takes_values_the_image_view_refuses():
    # soak seed 1327: a value with no elements, viewed as (-1, 1, H, 0), made the
    # generator itself raise
    from tests.fuzz.gen import _image_view

    assert _image_view(torch.zeros(0, 3, 0)) is None
    assert not _ambiguous_channels_last(_image_view(torch.zeros(0, 3, 0)))
