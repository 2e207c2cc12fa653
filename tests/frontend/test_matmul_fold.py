"""`[..., m, k] @ [k, n]` folds the batch into the rows (spec/tracer.md, linear algebra).

torch.matmul computes a batched left operand times a matrix (or vector) as one 2-d
product of the flattened rows; refcomp does the same, so the backward of a
transformer's `x @ w` is one GEMM per gradient.  Checked: results and gradients equal
eager for every rank of the left side, a vector right side, non-contiguous left
operands and symbolic (dynamic) batch sizes; the graph holds one 2-d matmul.
"""

from __future__ import annotations

import pytest
import torch

import refcomp


@pytest.fixture(autouse=True)
def fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def _mm(x, w):
    return torch.tanh(x @ w)


def _matmuls(compiled):
    (entry,) = compiled.cache.entries
    return [n for n in entry.graph.nodes if n.op.name == "matmul"]


@pytest.mark.parametrize("x_shape, w_shape", [
    ((3, 4, 5), (5, 6)), ((2, 3, 4, 5), (5, 6)), ((2, 1, 3, 5), (5,)), ((0, 4, 5), (5, 2)),
    ((3, 4, 5), (5, 1)),
])
def test_batched_left_times_matrix_is_one_2d_matmul_with_eager_gradients(x_shape, w_shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(x_shape, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(w_shape, generator=g, dtype=torch.float64, requires_grad=True)
    ex, ew = (t.detach().clone().requires_grad_() for t in (x, w))
    compiled = refcomp.compile(_mm)
    out, want = compiled(x, w), _mm(ex, ew)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    weights = torch.randn(want.shape, generator=g, dtype=torch.float64)
    (out * weights).sum().backward()
    (want * weights).sum().backward()
    torch.testing.assert_close(x.grad, ex.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w.grad, ew.grad, rtol=1e-12, atol=1e-12)
    (mm,) = _matmuls(compiled)
    assert [v.type.rank for v in mm.inputs] == [2, 2], str(compiled.cache.entries[0].graph)


def test_permuted_left_operand_folds_to_eager_values():
    x = torch.randn(4, 3, 5).permute(1, 0, 2)  # [3, 4, 5], not contiguous
    w = torch.randn(5, 6)
    compiled = refcomp.compile(_mm)
    torch.testing.assert_close(compiled(x, w), _mm(x, w))


def test_symbolic_batch_sizes_fold_once():
    compiled = refcomp.compile(_mm, dynamic=True)
    w = torch.randn(8, 3)
    for b, s in ((2, 5), (3, 7), (4, 2)):
        x = torch.randn(b, s, 8)
        torch.testing.assert_close(compiled(x, w), _mm(x, w))
    (mm,) = _matmuls(compiled)  # one entry for every size
    assert [v.type.rank for v in mm.inputs] == [2, 2]
    assert not mm.inputs[0].type.is_static


def test_batched_right_operand_still_broadcasts():
    x, w = torch.randn(4, 5), torch.randn(3, 5, 6)
    compiled = refcomp.compile(_mm)
    torch.testing.assert_close(compiled(x, w), _mm(x, w))
    (mm,) = _matmuls(compiled)
    assert [v.type.rank for v in mm.inputs] == [3, 3]
