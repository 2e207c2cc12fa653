"""nn.Module coverage: built-in modules compiled on their own equal eager (one graph)."""

import pytest
import torch
import torch.nn as nn

import refcomp

MHA_CASES = [(batch_first, same_kv, kwargs)
             for batch_first in (False, True) for same_kv in (True, False)
             for kwargs in ({}, {"need_weights": False}, {"attn_mask": "bool"},
                            {"attn_mask": "float", "average_attn_weights": False})]


@pytest.mark.parametrize("batch_first,same_kv,kwargs", MHA_CASES)
def test_multihead_attention_equals_eager(batch_first, same_kv, kwargs):
    torch.manual_seed(0)
    kdim = None if same_kv else 8
    mha = nn.MultiheadAttention(16, 4, batch_first=batch_first, kdim=kdim, vdim=kdim).eval()
    q, k = torch.randn(3, 5, 16), torch.randn(3, 7, 16 if same_kv else 8)
    v = torch.randn_like(k)
    if not batch_first:
        q, k, v = (t.transpose(0, 1).contiguous() for t in (q, k, v))
    kwargs = dict(kwargs)
    if kwargs.get("attn_mask") == "bool":
        kwargs["attn_mask"] = torch.rand(5, 7) > 0.7
    elif kwargs.get("attn_mask") == "float":
        kwargs["attn_mask"] = torch.randn(5, 7)
    with torch.no_grad():
        report = refcomp.explain(mha, q, k, v, backend="eager", **kwargs)
        want = mha(q, k, v, **kwargs)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    for got, exp in zip(report.result, want, strict=True):
        if exp is None:
            assert got is None
        else:
            torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-5)


def test_multihead_attention_gradients_match_eager():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    twin = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    twin.load_state_dict(mha.state_dict())
    x = torch.randn(2, 3, 8)
    mha(x, x, x)[0].sum().backward()
    refcomp.compile(twin, backend="interp")(x, x, x)[0].sum().backward()
    for p, q in zip(mha.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)


def test_multihead_attention_training_dropout_is_captured():
    # was RB009; equality with eager's draws: tests/training/test_attention_dropout.py
    mha = nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True).train()
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        report = refcomp.explain(mha, x, x, x, backend="eager")
    assert (report.graph_count, report.break_reasons) == (1, [])


@pytest.mark.parametrize("make", [lambda: nn.Linear(4, 3), lambda: nn.LayerNorm(4),
                                  lambda: nn.GELU(approximate="tanh"), lambda: nn.SiLU(),
                                  lambda: nn.Softmax(dim=-1), lambda: nn.LeakyReLU(0.2),
                                  lambda: nn.BatchNorm1d(4).eval(), lambda: nn.Dropout(0.3).eval(),
                                  lambda: nn.Sequential(nn.Linear(4, 4), nn.Tanh())])
def test_builtin_modules_compiled_directly_are_one_graph(make):
    torch.manual_seed(0)
    mod = make()
    x = torch.randn(2, 4)
    with torch.no_grad():
        report = refcomp.explain(mod, x, backend="interp")
        torch.testing.assert_close(report.result, mod(x), rtol=1e-5, atol=1e-5)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)


def _leaves(x):
    return torch.utils._pytree.tree_leaves(x)


@pytest.mark.parametrize("kind", ["post_norm", "norm_first", "nested_fast_path"])
def test_transformer_encoder_stack_is_one_graph(kind):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True,
                                       norm_first=kind == "norm_first")
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16) if kind == "norm_first"
                                else None, enable_nested_tensor=kind == "nested_fast_path")
    enc.eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        report = refcomp.explain(enc, x, backend="llvm")
        want = enc(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    torch.testing.assert_close(report.result, want, rtol=1e-5, atol=1e-5)


def test_transformer_encoder_with_causal_mask_and_gradients():
    # TransformerEncoder detects a causal mask from its values (one data-dependent break,
    # as in Dynamo); the layers then take the mask with the is_causal hint.
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    twin = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    twin.load_state_dict(enc.state_dict())
    x, mask = torch.randn(5, 2, 16), nn.Transformer.generate_square_subsequent_mask(5)
    want = enc(x, mask)
    want.sum().backward()
    report = refcomp.explain(twin, x, mask, backend="llvm")
    assert [b["id"] for b in report.break_reasons] == ["RB002"]
    torch.testing.assert_close(report.result, want, rtol=1e-5, atol=1e-5)
    report.result.sum().backward()
    for p, q in zip(enc.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)


RNNS = {"lstm2": lambda: nn.LSTM(8, 16, 2, batch_first=True),
        "lstm_bi": lambda: nn.LSTM(8, 16, 1, bidirectional=True),
        "lstm_proj": lambda: nn.LSTM(8, 16, 1, proj_size=4),
        "gru": lambda: nn.GRU(8, 16, 2),
        "rnn_tanh": lambda: nn.RNN(8, 16, 1)}


@pytest.mark.parametrize("name", list(RNNS))
def test_recurrent_modules_are_one_opaque_graph(name):
    torch.manual_seed(0)
    rnn = RNNS[name]().eval()
    x = torch.randn(3, 4, 8)
    with torch.no_grad():
        report = refcomp.explain(rnn, x, backend="llvm")
        want = rnn(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    for got, exp in zip(_leaves(report.result), _leaves(want), strict=True):
        torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-5)


def test_lstm_with_state_and_gradients_equal_eager():
    torch.manual_seed(0)
    lstm, twin = nn.LSTM(8, 16, 2), nn.LSTM(8, 16, 2)
    twin.load_state_dict(lstm.state_dict())
    x = torch.randn(4, 3, 8)
    hx = (torch.randn(2, 3, 16), torch.randn(2, 3, 16))
    out, (h, c) = lstm(x, hx)
    (out.sum() + h.sum() + c.sum()).backward()
    report = refcomp.explain(twin, x, hx, backend="llvm")
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    got, (gh, gc) = report.result
    for a, b in ((got, out), (gh, h), (gc, c)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    (got.sum() + gh.sum() + gc.sum()).backward()
    for p, q in zip(lstm.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)


def test_recurrent_dropout_in_training_draws_as_eager():
    # torch._VF.gru's dropout between layers: an opaque node drawing from torch's
    # generator at run time (Note [Random stream in program order]).
    gru = nn.GRU(8, 16, 2, dropout=0.5).train()
    x = torch.randn(4, 3, 8)
    with torch.no_grad():
        report = refcomp.explain(gru, x, backend="eager")
        assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
        refcomp.reset()
        compiled = refcomp.compile(gru, backend="eager")
        torch.manual_seed(0)
        got = compiled(x)
        torch.manual_seed(0)
        want = gru(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_identity_of_one_tensor_under_two_names():
    # Regression: `a is b` on two graph inputs was always False, so f(t, t) took the
    # wrong branch (RNNBase compares weakref targets with its parameters this way).
    def f(a, b):
        return a + 1 if a is b else a - 1

    cf = refcomp.compile(f, backend="eager")
    x, y = torch.zeros(2), torch.zeros(2)
    torch.testing.assert_close(cf(x, x), f(x, x))
    torch.testing.assert_close(cf(x, y), f(x, y))
    torch.testing.assert_close(cf(y, y), f(y, y))


def test_keyword_arguments_of_table_modules_bind_as_forward_names_them():
    # Regression (issue 35): `seq(input=x)` reached the Sequential handler as `input=`,
    # which names its parameter otherwise: TypeError, RB018 (internal error)
    torch.manual_seed(0)
    seq, lin = nn.Sequential(nn.Linear(3, 3), nn.ReLU()), nn.Linear(3, 2)

    def f(x):
        return seq(input=x).sum() + lin(input=x)

    x = torch.randn(2, 3)
    report = refcomp.explain(f, x)
    assert (report.graph_count, report.break_reasons) == (1, [])
    torch.testing.assert_close(report.result, f(x))
