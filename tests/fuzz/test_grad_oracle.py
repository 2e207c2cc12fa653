"""The gradient oracle's float64 judge (Note [Gradients judged in float64],
tests/fuzz/grad.py): it forgives float32 rounding noise where eager's own error is of
the same size, and nothing else."""

import torch

from tests.fuzz.grad import _judged_in_float64

TRUTH = torch.tensor([3.5e4, -1.2e4, 0.0], dtype=torch.float64)


def test_noise_of_eagers_size_passes():
    eager = (TRUTH + torch.tensor([0.0, 0.0, 0.16])).float()
    refcomp = (TRUTH + torch.tensor([0.0, 0.0, -0.09])).float()
    assert _judged_in_float64(refcomp, eager, TRUTH)


def test_a_wrong_value_fails_even_where_eager_is_noisy():
    eager = (TRUTH + torch.tensor([0.0, 0.0, 0.16])).float()
    refcomp = (TRUTH + torch.tensor([0.0, 5.0, 0.0])).float()
    assert not _judged_in_float64(refcomp, eager, TRUTH)


def test_nothing_is_forgiven_where_eager_is_far_from_the_float64_answer():
    # torch's own wrong gradient (tests/training/test_torch_batch_norm_bug.py) is no judge
    eager = (TRUTH + torch.tensor([0.0, 100.0, 0.0])).float()
    refcomp = (TRUTH + torch.tensor([0.0, 90.0, 0.0])).float()
    assert not _judged_in_float64(refcomp, eager, TRUTH)
    assert not _judged_in_float64(refcomp, eager, None)
