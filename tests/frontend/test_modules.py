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


def test_multihead_attention_training_dropout_falls_back():
    mha = nn.MultiheadAttention(8, 2, dropout=0.1, batch_first=True).train()
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        report = refcomp.explain(mha, x, x, x, backend="eager")
    assert [r["id"] for r in report.break_reasons] == ["RB009"]


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
