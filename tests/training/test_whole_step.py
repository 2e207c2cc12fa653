"""The whole training step compiled (issue 35): zero_grad, forward, loss, backward,
clip_grad_norm_, optimizer.step (AdamW, SGD with momentum), an LR scheduler's step.
The forward and loss are one graph, clip_grad_norm_ and the optimizer's step another
(spec/tracer.md, "Gradients, foreach ops and optimizer steps"); zero_grad, backward and
the scheduler's step run eagerly at named breaks.  These tests pin that the step equals
eager's over several steps (parameters, optimizer state, learning rate) and the graphs
and breaks explain() counts (never RB017, never a wrong answer)."""

import warnings

import pytest
import torch
import torch.nn as nn

import refcomp
from refcomp import reasons


def _setup(make_opt):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))
    opt = make_opt(model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        sched.step()
        return loss.detach()
    return model, opt, sched, step


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
}


def _run(make_opt, compiled, x, y, steps=5):
    model, opt, sched, step = _setup(make_opt)
    fn = refcomp.compile(step) if compiled else step
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scheduler stepped before the optimizer warns
        losses = torch.stack([fn(x, y) for _ in range(steps)])
    state = [{k: v.clone() for k, v in opt.state[p].items() if isinstance(v, torch.Tensor)}
             for p in model.parameters()]
    return losses, [p.detach().clone() for p in model.parameters()], state, sched.get_last_lr()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_whole_step_equals_eager_over_steps(name):
    # Gradients here are far above AdamW's eps, so its amplification of a gradient's
    # last-bit differences (TRAINING.md) stays within assert_close's tolerance.
    torch.manual_seed(1)
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    refcomp.reset()
    got = _run(OPTIMIZERS[name], True, x, y)
    want = _run(OPTIMIZERS[name], False, x, y)
    torch.testing.assert_close(got[0], want[0])
    for p, q in zip(got[1], want[1]):
        torch.testing.assert_close(p, q)
    for s, t in zip(got[2], want[2]):
        assert s.keys() == t.keys() and s
        for k in s:
            torch.testing.assert_close(s[k], t[k])
    assert got[3] == want[3]


def test_whole_step_breaks_carry_registered_reasons():
    torch.manual_seed(1)
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    refcomp.reset()
    *_, step = _setup(OPTIMIZERS["adamw"])
    report = refcomp.explain(step, x, y)
    ids = [b["id"] for b in report.break_reasons]
    # the forward and loss; clip_grad_norm_ and AdamW.step (was 1 graph, 6 breaks)
    assert report.graph_count == 2, report.ops_per_graph
    # zero_grad's _disable_dynamo, loss.backward(), the scheduler's _step_count
    assert ids == [reasons.UNSUPPORTED_CALL, reasons.UNSUPPORTED_CALL,
                   reasons.UNREPLAYABLE_SIDE_EFFECT], report.break_reasons
