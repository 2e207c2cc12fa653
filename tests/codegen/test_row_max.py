"""Note [Row max as integer max] (codegen/llvm/emit.py): a row kernel's float max/min keeps
an ordered integer key, so the masked row max of a causal softmax vectorizes; the values
are llvm.maximum's (NaN wins, an all -inf row gives -inf, denormals kept)."""

import numpy as np
import pytest
import torch

import refcomp
from codegen.llvm import jit

NAN, INF = float("nan"), float("inf")


def _rows(dtype):
    rows = [[1.0, -2.0, 3.0, 0.5], [NAN, 1.0, 2.0, -1.0], [1.0, 2.0, INF, NAN],
            [-0.0, 0.0, -0.0, -0.0], [0.0, -0.0, 0.0, 0.0], [-INF, -INF, -INF, -INF],
            [INF, INF, -1.0, 2.0], [-1e-40, -1e-39, -3.0, -2.0], [1e-45, 0.0, -0.0, 1e-44]]
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


def _same(got, want):
    """Equal, NaNs where eager's are (a tie of -0 and +0 may give either: spec/testing.md)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.double(), want.double()
    assert torch.equal(g.isnan(), w.isnan()), (got, want)
    ok = ~w.isnan()
    assert torch.equal(g[ok], w[ok]), (got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_row_max_min_special_values(dtype, op):
    x = _rows(dtype)
    fn = lambda x: getattr(x, op)(-1) * 1
    _same(refcomp.compile(fn)(x), fn(x))


def test_masked_row_max_and_softmax_vectorize_and_equal_eager():
    s = torch.randn(2, 4, 128, 128)
    s[0, 0, 5, 3] = NAN  # a NaN that the mask keeps
    s[1, 2, 7, 100] = NAN  # and one it hides
    m = torch.ones(128, 128, dtype=torch.bool).tril()

    def masked(s, m):
        w = torch.where(m, s, float("-inf"))
        return torch.softmax(w, -1), w.amax(-1), torch.where(m, s, INF).amin(-1)

    got = refcomp.compile(masked)(s, m)
    # the row max is one vector smax recurrence, not scalar code
    assert "llvm.vector.reduce.smax" in jit.optimized_ir() \
        or "llvm.vector.reduce.smin" in jit.optimized_ir()
    want = masked(s, m)
    torch.testing.assert_close(got[0], want[0], equal_nan=True)
    for g, w in zip(got[1:], want[1:]):
        _same(g, w)


def test_all_masked_row_gives_eager_nan_softmax():
    s = torch.randn(3, 16)
    m = torch.tensor([True] * 16 + [False] * 16 + [True, False] * 8).view(3, 16)
    fn = lambda s, m: torch.softmax(torch.where(m, s, float("-inf")), -1)
    torch.testing.assert_close(refcomp.compile(fn)(s, m), fn(s, m), equal_nan=True)
    assert np.isnan(refcomp.compile(fn)(s, m)[1].numpy()).all()
