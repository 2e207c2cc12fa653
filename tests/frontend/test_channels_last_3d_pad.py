"""`F.pad(x, ..., mode="replicate")` (and "reflect") of a channels_last_3d tensor is
channels_last_3d in eager ((128, 1, 32, 8, 2) for the padded shape (2, 2, 4, 4, 4)); refcomp
returned it row-major on every backend, of a graph input and of an intermediate alike.
ATen's CPU replication/reflection pad kernels allocate their result in the input's
suggested memory format; torch's meta kernels say so only for the 2-d pads (on the CPU:
device_hint), the 3-d ones return `new_empty`, row-major (Note [Eager's layout, not the
meta kernel's], refcomp/tracer/eager_layout.py: PADS_IN_SUGGESTED_FORMAT).  The fuzzer's
inputs cannot be channels_last_3d, so this test stands in for a corpus program (found
probing 3-d CNN ops, Nov 27; issue 11)."""

import pytest
import torch
import torch.nn.functional as F

import refcomp


def _pad(mode):
    def f(x):
        return F.pad(x, (1, 1, 1, 1, 1, 1), mode=mode)
    return f


def _pad_of_intermediate(mode):
    def f(x):
        return F.pad(x * 2, (1, 1, 1, 1, 1, 1), mode=mode)
    return f


def _aten_pad(x):
    return torch._C._nn.replication_pad3d(x, [1, 1, 0, 1, 1, 0])


def _cl3d():
    return torch.randn(2, 2, 2, 3, 2).contiguous(memory_format=torch.channels_last_3d)


def _cl():  # a 4-d input padded in 3 dims (no batch dim): channels_last, its suggested one
    return torch.randn(2, 2, 3, 2).contiguous(memory_format=torch.channels_last)


CASES = {  # name -> (function, input)
    "replicate": (_pad("replicate"), _cl3d), "reflect": (_pad("reflect"), _cl3d),
    "circular": (_pad("circular"), _cl3d),  # eager's is row-major: must stay so
    "replicate_of_intermediate": (_pad_of_intermediate("replicate"), _cl3d),
    "reflect_of_intermediate": (_pad_of_intermediate("reflect"), _cl3d),
    "aten_replication_pad3d": (_aten_pad, _cl3d),
    "unbatched": (_pad("replicate"), _cl), "unbatched_reflect": (_pad("reflect"), _cl),
}


@pytest.mark.parametrize("backend", ["llvm", "interp", "eager"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pad_of_channels_last_3d_keeps_eager_strides(case, backend):
    f, make = CASES[case]
    x = make()
    refcomp.reset()
    got = refcomp.compile(f, backend=backend)(x)
    want = f(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
