"""A training step with an LR scheduler compiled (issue 35).  The scheduler replaces
`optimizer.step` on the instance by a wrapper that binds the optimizer itself
(`func.__get__(opt, type(opt))(*args)`); the tracer took it for one of torch's
exception-converting wrappers and traced the function it wraps with the wrapper's own
arguments (none), so `self, *_ = args` failed (RB017: the frame ran eagerly).  The
wrapper is traced as it is: its bind is the optimizer's own step, traced with it (one
graph, spec/tracer.md Note [Optimizer steps]); the step equals eager's and the scheduler
sees optimizer.step called (no warning)."""

import warnings

import torch
import torch.nn as nn

import refcomp


def _setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    return model, opt, sched


def _train(compiled, x, steps=4):
    model, opt, sched = _setup()

    def step(x):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    run = refcomp.compile(step) if compiled else step
    losses = [run(x).detach() for _ in range(steps)]
    return losses, [p.detach().clone() for p in model.parameters()], sched.get_last_lr()


def test_step_with_an_lr_scheduler_equals_eager_without_rb017():
    x = torch.randn(5, 4)
    refcomp.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # lr_scheduler.step() before optimizer.step() warns
        got = _train(True, x)
    want = _train(False, x)
    torch.testing.assert_close(torch.stack(got[0]), torch.stack(want[0]))
    for p, q in zip(got[1], want[1]):
        torch.testing.assert_close(p, q)
    assert got[2] == want[2]
    model, opt, sched = _setup()

    def step_only(x):
        opt.step()
        return x * 2

    model(x).sum().backward()
    report = refcomp.explain(step_only, x)
    ids = [b["id"] for b in report.break_reasons]
    assert ids == [] and report.graph_count == 1, ids  # the step and x * 2, one graph
