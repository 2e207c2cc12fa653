"""Open (issue 11): `F.pad(x, ..., mode="replicate")` of a channels_last_3d *graph input*
is channels_last_3d in eager ((128, 1, 32, 8, 2) for shape (2, 2, 4, 4, 4)) and row-major
from refcomp; of a channels_last_3d intermediate it is right.  The fuzzer's inputs cannot
be channels_last_3d, so this strict xfail stands in for a corpus program (found probing
3-d CNN ops, Nov 27)."""

import pytest
import torch
import torch.nn.functional as F

import refcomp


@pytest.mark.xfail(strict=True, reason="open: replicate pad of a channels_last_3d input")
def test_replicate_pad_of_channels_last_3d_input_keeps_eager_strides():
    x = torch.randn(2, 2, 2, 2, 2).contiguous(memory_format=torch.channels_last_3d)

    def f(x):
        return F.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate")

    refcomp.reset()
    got = refcomp.compile(f, backend="llvm")(x)
    want = f(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
