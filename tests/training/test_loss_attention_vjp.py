"""Losses and attention under grad are derived in the IR (Note [Losses and attention in
the IR], refcomp/tracer/torch_ops.py): a graph with F.cross_entropy, F.nll_loss,
log_softmax + gather, F.embedding(padding_idx=...) or F.scaled_dot_product_attention
trains on the kernel backend (not op by op on the eager backend), with gradients no
further from float64 than eager's (within 4x) (issue 35)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp


def _entries():
    return [e for es in refcomp.stats()["frames"].values() for e in es]


def _grads(loss_fn, params, data, dtype=None):
    ps = [p.detach().to(dtype or p.dtype).requires_grad_() for p in params]
    ds = [d.to(dtype) if dtype is not None and d is not None and d.is_floating_point() else d
          for d in data]
    loss = loss_fn(*ps, *ds)
    return [loss.detach(), *torch.autograd.grad(loss, ps)]


def _check(loss_fn, params, data):
    """refcomp's loss and gradients (float32) against eager's, both judged by float64;
    the graph compiled forward and backward, not run op by op."""
    refcomp.reset()
    got = _grads(refcomp.compile(loss_fn, backend="llvm"), params, data)
    (entry,) = _entries()
    assert entry["reason"] is None and entry["backend"] == "llvm", entry
    assert entry["training"] is not None, entry["notes"]
    eager = _grads(loss_fn, params, data)
    exact = _grads(loss_fn, params, data, torch.float64)
    for g, e, x in zip(got, eager, exact):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert torch.isnan(g).equal(torch.isnan(x))
        ok = ~torch.isnan(x)
        err_g = (g.double() - x).abs()[ok].max() if ok.any() else 0.0
        err_e = (e.double() - x).abs()[ok].max() if ok.any() else 0.0
        scale = x.abs()[ok].max() if ok.any() else 1.0
        assert err_g <= 4 * err_e + 1e-6 * scale, (err_g, err_e)


torch.manual_seed(0)
N, C = 12, 7
TARGET = torch.randint(0, C, (N,))
TARGET[[2, 5]] = -100
WEIGHT = torch.rand(C) + 0.5


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy(reduction, smoothing, weighted):
    def f(w, x, t, cw):
        return F.cross_entropy(x @ w, t, weight=cw if weighted else None,
                               reduction=reduction, label_smoothing=smoothing).sum()
    _check(f, [torch.randn(5, C)], [torch.randn(N, 5), TARGET, WEIGHT])


@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_cross_entropy_ignore_index_and_spatial_dims(ignore_index):
    t = torch.randint(0, C, (2, 4, 3))
    t[0, 1] = ignore_index

    def f(w, x, t):
        return F.cross_entropy((x @ w).permute(0, 3, 1, 2), t,
                               ignore_index=ignore_index, label_smoothing=0.1)
    _check(f, [torch.randn(5, C)], [torch.randn(2, 4, 3, 5), t])


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_with_probabilities(smoothing):
    probs = torch.randn(N, C).softmax(-1)

    def f(w, x, p, cw):
        return F.cross_entropy(x @ w, p, weight=cw, label_smoothing=smoothing)
    _check(f, [torch.randn(5, C)], [torch.randn(N, 5), probs, WEIGHT])


def test_cross_entropy_of_all_ignored_targets_is_nan_as_eager():
    def f(w, x, t):
        return F.cross_entropy(x @ w, t)
    _check(f, [torch.randn(5, C)], [torch.randn(4, 5), torch.full((4,), -100)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    def f(w, x, t, cw):
        return F.nll_loss(F.log_softmax(x @ w, -1), t, weight=cw, reduction=reduction).sum()
    _check(f, [torch.randn(5, C)], [torch.randn(N, 5), TARGET, WEIGHT])


def test_cross_entropy_target_out_of_range_raises_as_eager():
    def f(x, t):
        return F.cross_entropy(x, t)
    x = torch.randn(3, C, requires_grad=True)
    t = torch.tensor([0, C, 1])
    with pytest.raises(IndexError):
        f(x, t)
    refcomp.reset()
    with pytest.raises(IndexError):
        refcomp.compile(f, backend="llvm")(x, t)


def test_log_softmax_gather():
    t = TARGET.clamp(min=0)

    def f(w, x, t):
        return -F.log_softmax(x @ w, -1).gather(1, t[:, None]).mean()
    _check(f, [torch.randn(5, C)], [torch.randn(N, 5), t])


def test_gather_index_out_of_range_raises():
    def f(x, i):
        return x.gather(1, i)
    x = torch.randn(3, 4, requires_grad=True)
    i = torch.tensor([[0], [4], [1]])
    with pytest.raises(RuntimeError):
        f(x, i)
    refcomp.reset()
    with pytest.raises(RuntimeError):
        refcomp.compile(f, backend="llvm")(x, i)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("padding_idx", [0, -1])
def test_embedding_padding_row_gets_no_gradient(backend, padding_idx):
    """The row at padding_idx got the gradient of its lookups (issue 35)."""
    weight = torch.randn(10, 4, requires_grad=True)
    idx = torch.tensor([[1, 0, 9, 0], [9, 3, 3, 0]])

    def f(i):
        return F.embedding(i, weight, padding_idx=padding_idx).pow(2).sum()
    refcomp.reset()
    refcomp.compile(f, backend=backend)(idx).backward()
    got, weight.grad = weight.grad, None
    f(idx).backward()
    torch.testing.assert_close(got, weight.grad, rtol=0, atol=0)
    assert got[padding_idx % 10].abs().sum() == 0


def _qkv(shape=(2, 3, 6, 8), s=None):
    q = torch.randn(*shape)
    kv_shape = shape[:-2] + (s or shape[-2], shape[-1])
    return q, torch.randn(*kv_shape), torch.randn(*kv_shape)


@pytest.mark.parametrize("form", ["plain", "causal", "scale", "bool_mask", "float_mask",
                                  "masked_row", "cross"])
def test_scaled_dot_product_attention(form):
    q, k, v = _qkv(s=5 if form == "cross" else None)
    mask = None
    if form == "bool_mask" or form == "masked_row":
        mask = torch.rand(6, 6) > 0.3
        mask.diagonal().fill_(True)
        if form == "masked_row":
            mask[2] = False
    elif form == "float_mask":
        mask = torch.randn(2, 1, 6, 6)
    kwargs = {"is_causal": form == "causal", "scale": 0.3 if form == "scale" else None}

    def f(wq, wk, wv, q, k, v, mask):
        return F.scaled_dot_product_attention(q @ wq, k @ wk, v @ wv, attn_mask=mask,
                                              **kwargs).pow(2).mean()
    _check(f, [torch.randn(8, 8) / 3 for _ in range(3)], [q, k, v, mask])


def test_sdpa_with_dropout_runs_as_eager_op_by_op():
    """Dropout inside SDPA is ATen's call (its random stream); under grad the graph runs
    on the eager backend, with a note."""
    q, k, v = _qkv()
    w = torch.randn(8, 8, requires_grad=True)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q @ w, k, v, dropout_p=0.5).sum()
    refcomp.reset()
    torch.manual_seed(1)
    got = refcomp.compile(f, backend="llvm")(q, k, v)
    torch.manual_seed(1)
    torch.testing.assert_close(got, f(q, k, v))
    (entry,) = _entries()
    assert entry["backend"] == "eager" and "no VJP" in " ".join(entry["notes"])


class TinyLM(nn.Module):
    def __init__(self, vocab=50, dim=32, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "out": nn.Linear(dim, dim),
            "ln2": nn.LayerNorm(dim), "ff1": nn.Linear(dim, 4 * dim),
            "ff2": nn.Linear(4 * dim, dim)}) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)
        self.heads = heads

    def forward(self, tokens, targets):
        h = self.emb(tokens)
        b, t, d = h.shape
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](h)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + blk["out"](a.transpose(1, 2).reshape(b, t, d))
            h = h + blk["ff2"](F.gelu(blk["ff1"](blk["ln2"](h))))
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def test_two_layer_lm_training_step_compiled_equals_eager():
    torch.manual_seed(0)
    model = TinyLM()
    ref = TinyLM()
    ref.load_state_dict(model.state_dict())
    tokens = torch.randint(0, 50, (3, 16))
    targets = torch.randint(0, 50, (3, 16))
    refcomp.reset()
    compiled = refcomp.compile(model, backend="llvm")
    for _ in range(2):
        model.zero_grad()
        ref.zero_grad()
        loss = compiled(tokens, targets)
        loss.backward()
        ref_loss = ref(tokens, targets)
        ref_loss.backward()
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
        for (name, p), r in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, r.grad, rtol=1e-4, atol=1e-6, msg=name)
    out = refcomp.explain(model, tokens, targets)
    assert out.graph_count == 1 and out.graph_break_count == 0
    assert not any("op by op" in n for n in out.notes), out.notes
    assert "aten" not in str(out.ops_per_graph)
    (entry,) = _entries()
    assert entry["backend"] == "llvm" and entry["training"]["backward_kernels"]


def test_sdpa_input_modified_after_the_graph_raises_at_backward_as_eager():
    """Eager's attention node saves q, k and v: changing q in place before backward
    raises there (the IR's matmul saves only the scaled q), and so it does after the
    compiled graph."""
    w = torch.randn(8, 8, requires_grad=True)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v @ w)

    for fn in (f, refcomp.compile(f, backend="llvm")):
        q, k, v = _qkv()
        q.requires_grad_()
        q2 = q * 1
        out = fn(q2, k, v)
        q2.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_a_graph_run_op_by_op_says_so_with_a_reason_id_and_is_counted():
    """A differentiable graph whose backward cannot be derived (an opaque ATen call)
    is captured but runs op by op: explain() names RB023 and stats() counts it.  (The
    opaque call: torch.einsum, one `aten` node.)"""
    from refcomp.reasons import OP_BY_OP_AUTOGRAD

    w = torch.randn(4, 3, requires_grad=True)

    def f(x, y):
        return (torch.einsum("ij,jk->ik", x, w) - y).pow(2).mean()

    refcomp.reset()
    x, y = torch.randn(5, 4), torch.randn(5, 3)
    out = refcomp.explain(f, x, y)
    assert out.graph_count == 1
    assert any(n.startswith(f"[{OP_BY_OP_AUTOGRAD}] autograd:") for n in out.notes), out.notes
    refcomp.reset()
    refcomp.compile(f)(x, y).backward()
    assert refcomp.stats()["counters"]["op_by_op_graphs"] == 1
    (entry,) = _entries()
    assert entry["backend"] == "eager"
