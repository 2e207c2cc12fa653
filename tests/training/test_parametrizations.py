"""Parametrizations (torch.nn.utils.parametrize, spectral_norm) run exactly once per call
of the compiled module, where the module reads the parametrized tensor, as in eager
(issue 35).  The property was read for real as a graph input: by the guards, by the cache
lookup and by the trace (3 runs on the first call, 2 on each later one, 8 on a no_grad
recompile), so spectral_norm's power iteration advanced several steps per call and its
state and the weight's gradient differed from eager's.  Spec: spec/autograd.md,
"Parametrizations"."""

import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils import parametrize

import refcomp

RUNS = []  # appended to by each run of the parametrization (replayed after a graph)


class Symmetric(nn.Module):
    def forward(self, w):
        RUNS.append(1)
        return (w + w.transpose(0, 1)) / 2


def _entries():
    return [e for es in refcomp.stats()["frames"].values() for e in es]


def _calls(fn, *args):
    RUNS.clear()
    out = fn(*args)
    return out, len(RUNS)


def test_a_parametrization_is_traced_into_the_graph_once_per_call():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    parametrize.register_parametrization(model[0], "weight", Symmetric())
    reference = copy.deepcopy(model)
    refcomp.reset()
    compiled = refcomp.compile(model)
    x = torch.randn(3, 4)
    for _ in range(3):
        out, calls = _calls(compiled, x)
        assert calls == 1
        out.square().sum().backward()
        reference(x).square().sum().backward()
    with torch.no_grad():  # a recompile (grad mode is guarded)
        out, calls = _calls(compiled, x)
    assert calls == 1
    torch.testing.assert_close(out, reference(x))
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    entries = _entries()
    assert [e["reason"] for e in entries] == [None, None]  # captured: no break
    assert any(e["training"] is not None for e in entries)


@pytest.mark.parametrize("training", [True, False])
def test_spectral_norm_state_and_gradients_equal_eager(training):
    torch.manual_seed(0)
    model = nn.utils.parametrizations.spectral_norm(nn.Linear(5, 4))
    model.train(training)
    reference = copy.deepcopy(model)
    sn, ref_sn = model.parametrizations.weight[0], reference.parametrizations.weight[0]
    runs = []
    original = type(sn).forward

    def counted(self, w):
        runs.append(self)
        return original(self, w)

    refcomp.reset()
    compiled = refcomp.compile(model)
    x = torch.randn(3, 5)
    try:
        type(sn).forward = counted
        for step in range(3):
            runs.clear()
            compiled(x).sum().backward()
            assert runs == [sn], f"step {step}: the parametrization ran {len(runs)} times"
            reference(x).sum().backward()
            torch.testing.assert_close(sn._u, ref_sn._u, msg=f"step {step}")
            torch.testing.assert_close(sn._v, ref_sn._v, msg=f"step {step}")
    finally:
        type(sn).forward = original
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    # one graph on the kernel backend: the power iteration's no_grad values feed sigma
    # through stop_gradient (tests/training/test_stopped_gradients.py)
    (entry,) = _entries()
    assert entry["reason"] is None and entry["training"] is not None, entry
    assert entry["backend"] != "eager"


def test_out_argument_into_a_buffer_is_captured():
    # spectral_norm's power iteration writes its buffers with F.normalize(out=...)
    class Power(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("u", torch.ones(4))

        def forward(self, w):
            with torch.no_grad():
                self.u = nn.functional.normalize(torch.mv(w, self.u), dim=0, out=self.u)
            return torch.mv(w, self.u.clone())

    w = torch.randn(4, 4)
    model, reference = Power(), Power()
    refcomp.reset()
    compiled = refcomp.compile(model)
    for _ in range(3):
        torch.testing.assert_close(compiled(w), reference(w))
        torch.testing.assert_close(model.u, reference.u)
    (entry,) = _entries()
    assert entry["reason"] is None


def test_out_argument_that_needs_autograd_raises_as_eager():
    def f(a, buf):
        return torch.add(a, 1, out=buf)

    a = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        f(a, torch.empty(3))
    refcomp.reset()
    with pytest.raises(RuntimeError) as compiled:
        refcomp.compile(f)(a, torch.empty(3))
    assert str(compiled.value) == str(eager.value)


def test_out_argument_torch_resizes_runs_as_eager():
    def f(a, buf):
        torch.mul(a, 2, out=buf)  # buf is resized from 0 elements, as torch does
        return buf + 1

    a = torch.randn(3)
    want_buf = torch.empty(0)
    want = f(a, want_buf)
    buf = torch.empty(0)
    refcomp.reset()
    torch.testing.assert_close(refcomp.compile(f)(a, buf), want)
    torch.testing.assert_close(buf, want_buf)
