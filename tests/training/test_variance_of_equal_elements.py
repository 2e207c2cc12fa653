"""var and std over equal elements (Note [How ATen computes var], ir/passes/decompose.py;
corpus grad_std_of_expanded_input_rounding): refcomp's variance is exactly 0 there, as
Welford's is, so std's gradient is the masked 0, on every CPU backend, with static and
symbolic sizes.  Eager's one-result kernel is the exception refcomp does not copy: its
mean is rounded by the order of its sum, and the last test pins down that claim."""

from __future__ import annotations

import pytest
import torch

import refcomp

BACKENDS = ["interp", "llvm"]

FORMS = {
    "std": lambda x: x.std(),
    "std_dim0": lambda x: x.std(0),
    "var": lambda x: x.var(),
    "var_dims": lambda x: torch.var(x, dim=(0, 1)),
    "std_correction0": lambda x: x.std(0, correction=0),
}


@pytest.fixture(autouse=True)
def fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def equal_elements(shape, dtype, seed):
    """One random value expanded to `shape`: values a with fl(fl(3a) / 3) != a among the
    seeds (the rounded mean of the old two-pass)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn((1,) * len(shape), generator=g, dtype=dtype) * 2 + 0.7).expand(shape)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_variance_and_std_gradient_of_equal_elements_are_exactly_zero(
        backend, form, dtype, dynamic):
    fn = refcomp.compile(FORMS[form], backend=backend, dynamic=dynamic)
    for seed, shape in enumerate([(3, 1, 5), (3, 3, 2), (5, 7, 3), (3, 3, 1)] * 3):
        x = equal_elements(shape, dtype, seed).detach().requires_grad_()
        out = fn(x)
        assert (out == 0).all(), (shape, out)
        out.sum().backward()
        if form.startswith("std"):  # masked where std is 0, as ATen's std_backward does
            assert (x.grad == 0).all(), (shape, x.grad)
        else:  # 2 (x - mean) / (N - correction), eager's formula: its mean rounds too
            eager = x.detach().clone().requires_grad_()
            FORMS[form](eager).sum().backward()
            torch.testing.assert_close(x.grad, eager.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_variance_of_unequal_elements_is_accurate(backend):
    # The shift by the first element changes nothing but rounding: values far from 0
    # with a small spread, where a two-pass in float32 loses digits, too.
    for values in (torch.randn(4, 33, 5), 1000 + torch.randn(4, 33, 5) * 1e-2):
        for form in FORMS.values():
            expected = form(values.double()).float()
            torch.testing.assert_close(refcomp.compile(form, backend=backend)(values),
                                       expected, rtol=1e-5, atol=1e-9)


def test_eager_welford_is_exact_and_its_one_result_kernel_is_not():
    # Several results: Welford in f64, exactly 0 for every row of equal elements.
    x = equal_elements((3, 2, 7), torch.float32, 4)
    assert (x.var(dim=(0, 1)) == 0).all()
    # One result (ATen's std_var_all_cpu): the squared deviations, in f64, from the mean
    # taken in float32 (so torch.mean's rounding), which need not be the elements' value.
    nonzero = 0
    for seed in range(40):
        one = equal_elements((3, 1), torch.float32, seed).reshape(-1)
        from_rounded_mean = ((one.double() - one.mean().double()) ** 2).sum() / 2
        assert one.var().item() == from_rounded_mean.float().item()
        nonzero += one.var().item() != 0
    assert nonzero > 0  # eager's rounding, not the exact 0 refcomp gives
