"""refcomp/ (tracer, guards, runtime, resume): behaviours no other test pinned, found by
mutation runs (tests/MUTANTS.md).  Each test names the planted bug it kills; all cheap."""

import pytest
import torch

import refcomp


@pytest.mark.parametrize("index", [
    lambda x: x[None, 1],
    lambda x: x[:, None, 2],
    lambda x: x[1, None, 1:3],
    lambda x: x[None, :, None, 0],
])
def test_none_in_an_index_moves_later_items_by_one_dim(index):
    # tensor_layout._basic_index: `None` inserts a dim, so the next item indexes the
    # dim after it (mutant: dim += 2 after None).
    x = torch.arange(24.0).reshape(4, 6)
    got = refcomp.compile(index, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(got, index(x))
