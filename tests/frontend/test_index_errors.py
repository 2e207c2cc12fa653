"""Indexing errors are eager's: an out-of-range index raises IndexError on every backend
(fuzz finding index_out_of_bounds_error_type: interp raised its own InterpreterError),
and index dtypes eager accepts (int32, int64) work (spec/correctness.md, "Exceptions")."""

import pytest
import torch

from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", [[0, 5], [-4], [3]])
def test_out_of_range_index_raises_index_error(index, backend):
    assert_like_eager(lambda x, i: x[i] * 2, lambda: (torch.randn(3, 4), torch.tensor(index)),
                      backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_embedding_raises_index_error(backend):
    f = lambda w, i: torch.nn.functional.embedding(i, w) + 1  # noqa: E731
    assert_like_eager(f, lambda: (torch.randn(5, 3), torch.tensor([[0, 7]])), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.uint8])
def test_index_dtypes_as_eager(dtype, backend):
    def f(x, i):
        return x[i] + 1, x[:, i], torch.index_select(x, 1, i.long()) * 2

    assert_like_eager(f, lambda: (torch.randn(4, 5), torch.tensor([0, 3, 1], dtype=dtype)),
                      backend)
