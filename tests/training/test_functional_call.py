"""`torch.func.functional_call` in a compiled function is traced (issue 35): the module's
call with the given tensors read in place of its parameters and buffers, one graph whose
gradients reach the given tensors, as in eager; it broke inside torch's generator
context manager (RB014) and the call ran eagerly.  The module itself is neither read
nor changed.  Spec: spec/tracer.md, "Modules"."""

import pytest
import torch
import torch.nn as nn

import refcomp


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8).eval(), nn.Tanh(),
                         nn.Linear(8, 3))


def _params(model, scale):
    return {k: (v.detach() * scale).requires_grad_() for k, v in model.named_parameters()}


def _entries():
    return [e for es in refcomp.stats()["frames"].values() for e in es]


@pytest.mark.parametrize("form", ["dict", "dicts", "partial", "stateless", "kwargs"])
def test_functional_call_is_one_graph_with_eagers_gradients(form):
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def loss(params, buffers, x):
        if form == "dict":
            out = torch.func.functional_call(model, {**params, **buffers}, (x,))
        elif form == "dicts":
            out = torch.func.functional_call(model, (params, buffers), x)
        elif form == "partial":  # only the weights given: the biases are the module's
            weights = {k: v for k, v in params.items() if k.endswith("weight")}
            out = torch.func.functional_call(model, weights, (x,))
        elif form == "stateless":
            out = torch.nn.utils.stateless.functional_call(model, params, (x,))
        else:
            out = torch.func.functional_call(model, params, args=(), kwargs={"input": x})
        return (out * out).mean()

    x = torch.randn(5, 4)
    buffers = {k: v * 1.5 + 0.1 for k, v in model.named_buffers() if v.is_floating_point()}
    results = []
    for compiled in (True, False):
        refcomp.reset()
        params = _params(model, 0.5)
        run = refcomp.compile(loss) if compiled else loss
        for step in range(2):
            value = run(params, buffers, x)
            value.backward()
        results.append((value.detach(), {k: p.grad for k, p in params.items()},
                        [p.grad for p in model.parameters()]))
        model.zero_grad()
        if compiled:
            entries = _entries()
    (got, got_grads, got_own), (want, want_grads, want_own) = results
    torch.testing.assert_close(got, want)
    for k in want_grads:
        torch.testing.assert_close(got_grads[k], want_grads[k], msg=k)
    for a, b in zip(got_own, want_own):  # the module's own tensors: used where not given
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)
    # the module's biases are used (and get gradients) only where they are not given
    assert any(g is not None for g in want_own) == (form == "partial")
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert [e["reason"] for e in entries] == [None] and entries[0]["training"] is not None


def test_functional_call_of_a_module_with_tied_weights_runs_in_torch():
    emb = nn.Embedding(6, 4)
    head = nn.Linear(4, 6, bias=False)
    head.weight = emb.weight
    model = nn.Sequential(emb, head)
    params = {"0.weight": torch.randn(6, 4, requires_grad=True)}

    def f(ids):
        return torch.func.functional_call(model, params, (ids,)).sum()

    ids = torch.tensor([1, 2, 3])
    refcomp.reset()
    report = refcomp.explain(f, ids)
    assert [b["id"] for b in report.break_reasons] == ["RB004"]
    assert "tied" in report.break_reasons[0]["reason"]
    torch.testing.assert_close(report.result, f(ids))
