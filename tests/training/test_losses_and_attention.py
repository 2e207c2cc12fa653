"""cross_entropy, nll_loss and scaled_dot_product_attention under autograd are traced as IR
with VJPs (Note [Losses and attention in the IR] in
refcomp/tracer/torch_ops.py), so a training graph holding them compiles forward and
backward instead of running op by op; values and gradients are eager's."""

import pytest
import torch
import torch.nn.functional as F

import refcomp

BACKENDS = ["interp", "eager", "llvm"]
OP_BY_OP = "runs on 'eager' (autograd records op by op)"


def _same_with_grads(fn, inputs, backend, atol=1e-5):
    eager_in = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    comp_in = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    want, got = fn(*eager_in), refcomp.compile(fn, backend=backend)(*comp_in)
    torch.testing.assert_close(got, want, atol=atol, rtol=1e-5, equal_nan=True)
    (want.sum() if want.dim() else want).backward()
    (got.sum() if got.dim() else got).backward()
    for a, b in zip(comp_in, eager_in):
        if b.requires_grad:
            torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=1e-4)
    notes = " ".join(refcomp.explain(fn, *inputs).notes)
    assert "compiled forward and backward" in notes and OP_BY_OP not in notes, notes


LOSSES = {
    "mean": dict(),
    "sum": dict(reduction="sum"),
    "none": dict(reduction="none"),
    "weight": dict(weight="w"),
    "weight_none": dict(weight="w", reduction="none"),
    "ignore": dict(ignore_index=3),
    "smoothing": dict(label_smoothing=0.1),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_cross_entropy_trains_compiled(name, backend):
    torch.manual_seed(0)
    kwargs = dict(LOSSES[name])
    if kwargs.get("weight") == "w":
        kwargs["weight"] = torch.rand(5)
    x = torch.randn(6, 5, requires_grad=True)
    target = torch.tensor([0, 4, kwargs.get("ignore_index", -100), 3, 3, 1])
    _same_with_grads(lambda x, t: F.cross_entropy(x, t, **kwargs), [x, target], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nll_loss_of_log_softmax_trains_compiled(backend):
    torch.manual_seed(0)
    x = torch.randn(4, 7, requires_grad=True)
    target = torch.tensor([6, 0, 2, 2])
    _same_with_grads(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), [x, target], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_target_out_of_range_raises_eagers_index_error(backend):
    x = torch.randn(3, 4, requires_grad=True)
    target = torch.tensor([0, 9, 1])
    with pytest.raises(IndexError):
        F.cross_entropy(x, target)
    with pytest.raises(IndexError):
        refcomp.compile(lambda x, t: F.cross_entropy(x, t), backend=backend)(x, target)


def test_every_target_ignored_is_nan_as_in_eager():
    x = torch.randn(3, 4, requires_grad=True)
    target = torch.full((3,), -100)
    got = refcomp.compile(lambda x, t: F.cross_entropy(x, t))(x, target)
    assert torch.isnan(got) and torch.isnan(F.cross_entropy(x, target))


ATTENTION = {"plain": dict(), "causal": dict(is_causal=True), "scale": dict(scale=0.3),
             "float_mask": dict(attn_mask="float")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention_trains_compiled(name, backend):
    torch.manual_seed(0)
    kwargs = dict(ATTENTION[name])
    if kwargs.get("attn_mask") == "float":
        kwargs["attn_mask"] = torch.randn(5, 6)
    q = torch.randn(2, 2, 5, 8, requires_grad=True)
    k = torch.randn(2, 2, 6, 8, requires_grad=True)
    v = torch.randn(2, 2, 6, 4, requires_grad=True)
    _same_with_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs),
                     [q, k, v], backend, atol=1e-4)


def test_attention_saves_what_eager_saves():
    q = torch.randn(2, 5, 8, requires_grad=True)

    def f(q):
        k = q * 2
        return F.scaled_dot_product_attention(q, k, k), k

    for fn in (f, refcomp.compile(f)):
        out, k = fn(q)
        k.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
