"""A compiled call warns where eager warns, and nowhere else: a warning eager never shows
is an exception under `-W error` that eager would not raise."""

import warnings

import pytest
import torch

import refcomp


def _warnings_of(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [str(w.message) for w in caught]


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_linear_of_a_vector_warns_nothing(backend):
    # Found by issue 32's probes (Nov 29): the llvm backend's matmul into its planned
    # bytes (`torch.matmul(x, w, out=buf)`) of a vector times a matrix made torch resize
    # `buf` to [1, n] with "An output with one or more elements was resized".
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(4)
    want, eager_warnings = _warnings_of(lin, x)
    got, compiled_warnings = _warnings_of(refcomp.compile(lin, backend=backend), x)
    torch.testing.assert_close(got, want)
    assert compiled_warnings == eager_warnings == []
    f = refcomp.compile(lambda v, m: v @ m * 2, backend=backend)
    m = torch.randn(4, 3)
    got, compiled_warnings = _warnings_of(f, x, m)
    torch.testing.assert_close(got, x @ m * 2)
    assert compiled_warnings == []
