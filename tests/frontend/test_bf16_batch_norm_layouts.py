"""bfloat16 `F.batch_norm` (refcomp's own kernel: the IR's batch_norm, decomposed in float32)
on inputs eager lays out in every way (issue 11).

ATen's CPU batch norm takes one of two paths by layout (`batch_norm_cpu_transform_input
_template`): an input contiguous in some memory format (row-major, channels_last) runs
the vectorized kernel, which computes in float and rounds once; any other input (a
transposed, permuted or step-sliced one) runs a TensorIterator loop in the parameters'
type, `((x - mean) * invstd) * weight + bias`, each of its four operations rounded to
bfloat16 when the parameters are bfloat16 (with float32 parameters, the mixed-type loop
computes in float and rounds once).  So eager's result of one value differs between
layouts (up to 2 ulps here), and no layout-blind kernel is eager's bitwise on both paths.

Decided: refcomp computes every layout as eager's contiguous path does (float32, one
rounding): in evaluation the correctly rounded result and eager's contiguous result
bitwise; in training (eager and refcomp both round the batch statistics to bfloat16
first) within an ulp of eager; within the fuzzer's bfloat16 tolerance of eager on every
layout, with `normal` and `shifted` values (measured, Nov 27: refcomp against eager's
non-contiguous result up to 0.125 with normal values, 2.0 on values near 200 with
shifted ones; eager's non-contiguous result up to 170 ulps off the exact value where
`+ bias` cancels, refcomp's 0.5).  These tests fail if
refcomp's result stops being one rounding of the exact value, drifts beyond the fuzzer's
tolerance of eager on any layout, or leaves eager's contiguous path; and they pin why
eager's non-contiguous result is not the reference (it is off by more than one rounding).
spec/tracer.md, "OpInfo coverage" (bfloat16)."""

import math

import pytest
import torch
import torch.nn.functional as F

import refcomp
from tests.fuzz.inputs import make
from tests.fuzz.runner import TOLERANCE, _compare_tensor


def _params(c, dtype):
    return (torch.linspace(-1, 1, c, dtype=dtype), torch.linspace(0.5, 2, c, dtype=dtype),
            torch.linspace(-2, 2, c, dtype=dtype), torch.linspace(-3, 3, c, dtype=dtype))


def eval_bf16_params(x):
    mean, var, weight, bias = _params(x.shape[1], x.dtype)
    return F.batch_norm(x, mean, var, weight, bias)


def eval_f32_stats(x):  # mixed types: float32 statistics (the fuzzer's form)
    return F.batch_norm(x, torch.zeros(x.shape[1]), torch.ones(x.shape[1]))


def train_no_params(x):  # the fuzzer's other form
    return F.batch_norm(x, None, None, training=True)


FORMS = {"eval_bf16_params": eval_bf16_params, "eval_f32_stats": eval_f32_stats,
         "train_no_params": train_no_params}
SAMPLES = [((4, 3, 5), layout) for layout in ("contiguous", "transposed", "permuted", "step")] \
    + [((2, 3, 4, 5), "channels_last"), ((2, 3, 4, 5), "transposed")]


def _exact(form, x):
    """The form's value in float64 from the same bfloat16 inputs and parameters."""
    x64, dims = x.double(), [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if form == "train_no_params":
        mean, var = x64.mean(dims), x64.var(dims, correction=0)
        weight = bias = None
    elif form == "eval_f32_stats":
        mean, var = torch.zeros(x.shape[1], dtype=torch.float64), \
            torch.ones(x.shape[1], dtype=torch.float64)
        weight = bias = None
    else:
        mean, var, weight, bias = (p.double() for p in _params(x.shape[1], x.dtype))
    out = (x64 - mean.view(shape)) / torch.sqrt(var.view(shape) + 1e-5)
    if weight is not None:
        out = out * weight.view(shape) + bias.view(shape)
    return out


def _one_rounding(got, exact):
    """Is every element of the bfloat16 `got` within half an ulp of `exact` (float64), plus
    the float32 arithmetic's own error (far below a bfloat16 ulp)?"""
    mag = exact.abs().clamp_min(2.0 ** -126)
    half_ulp = 0.5 * torch.exp2(torch.floor(torch.log2(mag)) - 7)
    return bool(((got.double() - exact).abs() <= half_ulp + 1e-4 * (1 + mag)).all())


@pytest.mark.parametrize("backend", ["llvm", "interp", "eager"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_bf16_batch_norm_is_one_rounding_and_within_tolerance_of_eager(form, backend):
    f = FORMS[form]
    for shape, layout in SAMPLES:
        for values in ("normal", "shifted"):
            x = make(shape, "bfloat16", layout, 0, values)
            refcomp.reset()
            got = refcomp.compile(f, backend=backend)(x)
            want = f(x)
            where = (form, shape, layout, values)
            # the fuzzer's comparison with eager on this very layout (strides too)
            bad = _compare_tensor("out", got, want, floor=TOLERANCE[torch.bfloat16])
            assert bad is None, (where, bad and bad.detail)
            if form.startswith("eval"):
                # one rounding of the exact value, and eager's contiguous path bitwise
                # (training rounds the batch statistics to bfloat16 first, in eager on
                # every layout and here alike: neither is one rounding of the exact value)
                assert _one_rounding(got, _exact(form, x)), where
                assert torch.equal(got, f(x.contiguous())), where


def test_eager_bf16_batch_norm_of_a_non_contiguous_input_rounds_each_step():
    """Why eager's non-contiguous result is not the reference: with bfloat16 parameters
    it is more than one rounding off the exact value (its contiguous result is not), and
    the two paths differ.  If a torch upgrade changes this, revisit the decision above."""
    worst_t, worst_c = 0.0, 0.0
    for shape, layout in SAMPLES:
        if layout in ("contiguous", "channels_last"):
            continue
        for values in ("normal", "shifted"):
            x = make(shape, "bfloat16", layout, 0, values)
            exact = _exact("eval_bf16_params", x)
            for out, worst in ((eval_bf16_params(x), "t"),
                               (eval_bf16_params(x.contiguous()), "c")):
                mag = exact.abs().clamp_min(2.0 ** -126)
                ulps = ((out.double() - exact).abs() /
                        torch.exp2(torch.floor(torch.log2(mag)) - 7)).max().item()
                if worst == "t":
                    worst_t = max(worst_t, ulps)
                else:
                    worst_c = max(worst_c, ulps)
    assert worst_c <= 0.5 + 1e-2 and worst_t > 1, (worst_c, worst_t)
    assert not math.isnan(worst_t)
