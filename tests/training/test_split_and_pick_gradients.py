"""The gradient of a split is one cat, and the gradient of a one-per-row gather (the
target's log-probability in cross_entropy) a select against an iota: no zero-padded
copies and no scatter into zeros in the backward (ir/autodiff.py, Note [Split gradients
are one cat]; ir/ops/layout.py, `_one_hot_scatter`) (issue 35)."""

import torch
import torch.nn.functional as F

import refcomp
from refcomp.resume import located_entries


def _backward_ops(step, fn) -> list:
    code = fn.__code__
    ((record, _),) = located_entries(step.cache, f"{code.co_filename}:{code.co_firstlineno}")
    return [n.op.name for n in record.training.backward_graph.nodes]


def _grads(fn, params, *data):
    loss = fn(*params, *data)
    return [loss.detach(), *torch.autograd.grad(loss, params)]


def _qkv(w, b, x):
    q, k, v = F.linear(x, w, b).split(8, dim=-1)
    return (torch.softmax(q @ k.transpose(1, 2), -1) @ v).sin().sum()


def _uneven(w, x):
    h = x @ w
    a, c = h[:, :3], h[:, 5:]  # the middle columns are no piece's: no cat
    return a.exp().sum() + c.pow(2).sum() + h[:, 1:4].sum()


def _cross_entropy(w, x, t):
    return F.cross_entropy(x @ w, t, ignore_index=-100)


def _gather_rows(w, x, t):
    return (x @ w).log_softmax(1).gather(1, t.unsqueeze(1)).sum()


def _gather_partial(w, x, t):  # index narrower than x outside dim: a scatter
    return (x @ w).gather(1, t[:3].unsqueeze(1)).sum()


def _check(fn, params, *data, has=(), lacks=()):
    step = refcomp.compile(fn, backend="llvm")
    got = _grads(step, [p.detach().requires_grad_() for p in params], *data)
    want = _grads(fn, [p.detach().requires_grad_() for p in params], *data)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12)
    ops = _backward_ops(step, fn)
    assert all(op in ops for op in has), ops
    assert not any(op in ops for op in lacks), ops
    return step


def test_split_gradients_are_one_cat():
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(24, 8, generator=g, dtype=torch.float64), torch.randn(24, dtype=torch.float64)
    x = torch.randn(2, 5, 8, generator=g, dtype=torch.float64)
    _check(_qkv, [w, b], x, has=["cat"], lacks=["pad"])


def test_pieces_that_do_not_tile_are_padded_and_added():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(4, 9, generator=g, dtype=torch.float64)
    x = torch.randn(6, 4, generator=g, dtype=torch.float64)
    _check(_uneven, [w], x, has=["pad"], lacks=["cat"])


def test_cross_entropy_gradient_has_no_scatter():
    g = torch.Generator().manual_seed(2)
    w = torch.randn(6, 11, generator=g, dtype=torch.float64)
    x = torch.randn(9, 6, generator=g, dtype=torch.float64)
    t = torch.randint(0, 11, (9,), generator=g)
    t[4] = -100
    _check(_cross_entropy, [w], x, t, lacks=["scatter_add"])
    _check(_gather_rows, [w], x, t.clamp(min=0), lacks=["scatter_add"])


def test_a_narrower_gather_still_scatters():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(6, 11, generator=g, dtype=torch.float64)
    x = torch.randn(9, 6, generator=g, dtype=torch.float64)
    t = torch.randint(0, 11, (9,), generator=g)
    _check(_gather_partial, [w], x, t, has=["scatter_add"])


def test_repeated_targets_and_float32_equal_eager_bitwise():
    # Each row picks one class, so nothing accumulates: the select is the scatter's value.
    g = torch.Generator().manual_seed(4)
    w = torch.randn(16, 5, generator=g)
    x = torch.randn(32, 16, generator=g)
    t = torch.zeros(32, dtype=torch.long)
    t[::3] = 4
    step = refcomp.compile(_gather_rows, backend="llvm")
    (got,) = torch.autograd.grad(step(w.requires_grad_(), x, t), w)
    (want,) = torch.autograd.grad(_gather_rows(w, x, t), w)
    torch.testing.assert_close(got, want)


def _tied(emb, w, ids):
    x = F.embedding(ids, emb)  # the weight's rows, and the output projection's weight
    return F.cross_entropy((x @ w).tanh() @ emb.t(), ids.flip(0))


def test_tied_embedding_gradient_scatters_into_the_other_gradient():
    # Note [Scatters into zeros add into the other gradients]: no zero fill, no add.
    g = torch.Generator().manual_seed(5)
    emb = torch.randn(11, 6, generator=g, dtype=torch.float64)
    w = torch.randn(6, 6, generator=g, dtype=torch.float64)
    ids = torch.tensor([3, 1, 3, 0, 10, 3, 1])  # repeats accumulate
    step = _check(_tied, [emb, w], ids, has=["index_add"])
    code = _tied.__code__
    ((record, _),) = located_entries(step.cache, f"{code.co_filename}:{code.co_firstlineno}")
    weight_sized = [n.op.name for n in record.training.backward_graph.nodes
                    if n.outputs[0].type.shape == (11, 6)]
    assert "full" not in weight_sized and "add" not in weight_sized, weight_sized


def _embedding_only(emb, ids):
    return F.embedding(ids, emb).pow(2).sum()


def test_embedding_alone_still_scatters_into_zeros():
    g = torch.Generator().manual_seed(6)
    emb = torch.randn(7, 3, generator=g, dtype=torch.float64)
    _check(_embedding_only, [emb], torch.tensor([2, 2, 5]), has=["index_add", "full"])
