"""A value made by detach() or under no_grad that feeds an op recording gradients is
captured (issue 35; it was RB011): the op reads it through `stop_gradient` (Note [Stopped
gradients], ir/ops/pointwise.py), so the gradient reaches the op's other operands only,
on the kernel backends (joint() stops there) and on the op-by-op eager backend (it runs
as detach).  An in-place write of such a value into a tensor that requires grad is
still RB011.  Spec: spec/autograd.md, "The joint graph"."""

import pytest
import torch

import refcomp


def detach_scale(x, w):
    y = x.detach() * w + x
    return (y * y).sum()


def no_grad_statistic(x, w):
    with torch.no_grad():
        scale = x.abs().amax() + 1
    return (x * w / scale).sum()


def target_network(x, w, target):
    y = x @ w
    with torch.no_grad():
        t = (x @ target).softmax(-1)
    return -(t * y.log_softmax(-1)).sum()


def detached_twice(x, w):
    h = torch.tanh(x * w)
    return (h * h.detach() + h.detach().exp()).mean()


def no_grad_of_a_weight(x, w):
    with torch.no_grad():
        norm = torch.mv(w, x[0]).norm()  # spectral_norm's pattern: a no_grad use of w
    return (x @ w.t() / norm).sum()


CASES = {"detach_scale": (detach_scale, [(4,), (4,)]),
         "no_grad_statistic": (no_grad_statistic, [(3, 4), (4,)]),
         "target_network": (target_network, [(3, 4), (4, 5), (4, 5)]),
         "detached_twice": (detached_twice, [(6,), (6,)]),
         "no_grad_of_a_weight": (no_grad_of_a_weight, [(3, 4), (4, 4)])}


@pytest.mark.parametrize("backend", ["llvm", "eager"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_stopped_gradient_equals_eager(case, backend):
    fn, shapes = CASES[case]
    torch.manual_seed(0)
    leaves = [torch.randn(s, requires_grad=i < 2) for i, s in enumerate(shapes)]
    refcomp.reset()
    x = leaves[0] * 1  # a non-leaf input, as a forward's activations are
    got = refcomp.compile(fn, backend=backend)(x, *leaves[1:])
    got.backward()
    grads = [t.grad for t in leaves[:2]]
    for t in leaves:
        t.grad = None
    want = fn(leaves[0] * 1, *leaves[1:])
    want.backward()
    torch.testing.assert_close(got, want)
    for g, t in zip(grads, leaves[:2]):
        torch.testing.assert_close(g, t.grad)
    (entry,) = [e for es in refcomp.stats()["frames"].values() for e in es]
    assert entry["reason"] is None
    if backend == "llvm":
        assert entry["backend"] == "llvm" and entry["training"] is not None, entry


def test_inplace_write_of_a_detached_value_into_a_tensor_that_requires_grad_is_rb011():
    def f(x, w):
        h = x * w
        h.add_(x.detach())
        return h.sum()

    x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    report = refcomp.explain(f, x * 1, w)
    assert [b["id"] for b in report.break_reasons] == ["RB011"]
