"""codegen/: behaviours no other test pinned, found by mutation runs (tests/MUTANTS.md).

Each test names the planted bug it kills; all are cheap.
"""

import numpy as np
import pytest
import torch

import ir
from codegen import stats
from codegen.backends import get_backend


def test_reset_zeroes_every_counter():
    # Tests elsewhere read counters as differences; a counter that starts at 1 (mutant:
    # a default 0 -> 1) shows only here.  refcomp.stats() reports these after reset().
    stats.STATS.kernels += 3
    stats.STATS.fallback("node %0", "why")
    stats.reset()
    snap = stats.snapshot()
    assert snap.pop("fallback_reasons") == []
    assert all(v == 0 for v in snap.values()), snap


@pytest.mark.parametrize("text", [
    "func @f(%x: f32[], %i: i64[1], %s: f32[]) -> f32[] {\n"
    "  %0 = index_add %x, %i, %s {dim=0} : f32[]\n  return %0\n}\n",
    "func @f(%x: f32[], %i: i64[0], %s: f32[]) -> f32[] {\n"
    "  %0 = index_add %x, %i, %s {dim=0} : f32[]\n  return %0\n}\n",
])
def test_eager_rank0_index_add_equals_the_interpreter(text):
    # torch's index_add takes no rank-0 self, so the eager backend adds directly
    # (codegen/eager.py `_scatter`; mutant: the arms of its `if index.numel()` swapped).
    graph = ir.parse(text)
    x, s = np.float32(1.5), np.float32(2.25)
    i = np.zeros(graph.inputs[1].type.shape, np.int64)
    want = ir.run(graph, [np.asarray(x), i, np.asarray(s)])[0]
    (got,) = get_backend("eager").compile_graph(graph, {})(
        torch.tensor(x), torch.from_numpy(i), torch.tensor(s))
    np.testing.assert_array_equal(got.numpy(), want)
