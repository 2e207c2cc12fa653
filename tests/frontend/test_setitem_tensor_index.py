"""Item assignment with one tensor index (issue 33/36: Mixtral's router restores its
order with `inv_perm[perm] = torch.arange(n)`, which broke with RB013 and split
Mixtral into 11 graphs): `x[mask] = v` (a boolean mask of x's leading dims, one value)
is eager's masked_fill_, `x[i] = v` (a 1-d int64 index) eager's index_put_; both are
then the table ops, captured, under grad with eager's gradients.  Other tensor indices
still break (RB013)."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def _rows(x, i):
    y = x.clone()
    y[i] = torch.arange(i.shape[0], dtype=x.dtype)[:, None]
    return y * 2


def _mask_number(x):
    y = x * 1
    y[y < 0] = 0.5
    return y + 1


def _mask_rows_tensor(x, m):
    y = x.clone()
    y[m] = x.sum()
    return y


def _inverse_permutation(perm):
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0))
    return inv


def _rows_number(x, i):
    y = x.clone()
    y[i] = 7
    return y


CASES = [(_rows, lambda: (torch.randn(5, 3), torch.tensor([3, 0, 3]))),
         (_mask_number, lambda: (torch.randn(5, 3),)),
         (_mask_rows_tensor, lambda: (torch.randn(5, 3),
                                      torch.tensor([True, False, True, False, True]))),
         (_inverse_permutation, lambda: (torch.randperm(6),)),
         (_rows_number, lambda: (torch.randn(5, 3), torch.tensor([4, 1])))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, make", CASES, ids=[c[0].__name__ for c in CASES])
def test_item_assignment_by_one_tensor_index_is_captured(fn, make, backend):
    torch.manual_seed(0)
    args = make()
    refcomp.reset()
    report = refcomp.explain(fn, backend=backend)(*args)
    assert report.graph_count == 1 and report.graph_break_count == 0, str(report)
    torch.testing.assert_close(refcomp.compile(fn, backend=backend)(*args), fn(*args))


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_assignment_of_a_value_that_requires_grad_has_eagers_gradient(backend):
    def f(x, w, m):
        y = x * 2
        y[m] = w.sum()
        return (y * y).sum()

    m = torch.tensor([True, False, True, False])
    x0, w0 = torch.randn(4, 3), torch.randn(2)
    grads = []
    for fn in (f, refcomp.compile(f, backend=backend)):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        fn(x, w, m).backward()
        grads.append((x.grad, w.grad))
    torch.testing.assert_close(grads[1], grads[0])


def test_other_tensor_indices_still_break():
    def f(x, i):
        y = x.clone()
        y[i, 0] = 1.0  # a tensor index with another index: not one table op
        return y

    report = refcomp.explain(f, backend="eager")(torch.randn(4, 3), torch.tensor([1, 2]))
    assert [r["id"] for r in report.break_reasons] == ["RB013"]
