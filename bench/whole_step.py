"""The whole training step compiled (issue 35): zero_grad, forward, cross_entropy,
backward, clip_grad_norm_, AdamW.step, StepLR.step of an MLP 256 -> 1024 -> 256 with
LayerNorm, batch 512.  Prints the graph and break counts from explain() and the CPU time
per step (median of rounds) compiled vs eager, for a float lr (a graph input after one
recompile: spec/guards.md, "Python float values") and for `lr=torch.tensor(...)`, and the step
after backward alone (clip_grad_norm_ of a list and AdamW.step).
`PYTHONPATH=. python -m bench.whole_step`"""

import statistics
import time

import torch
import torch.nn as nn

import refcomp


def setup(seed=0, lr=1e-3):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.LayerNorm(1024),
                          nn.Linear(1024, 256))
    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3) if lr == "tensor" else lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss.detach()
    return model, step


def cpu_per_step(fn, args, steps=5, rounds=5):
    fn(*args)
    fn(*args)
    times = []
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(steps):
            fn(*args)
        times.append((time.process_time() - t) / steps)
    return statistics.median(times)


def post_backward(seed=0):
    """clip_grad_norm_ of the parameter list and AdamW.step, on fixed gradients."""
    model, _ = setup(seed, "tensor")
    ps = list(model.parameters())
    opt = torch.optim.AdamW(ps, lr=torch.tensor(1e-3))
    torch.manual_seed(seed)
    model(torch.randn(512, 256)).logsumexp(1).sum().backward()

    def post():
        torch.nn.utils.clip_grad_norm_(ps, 1.0)
        opt.step()
    return post


def main():
    torch.set_num_threads(1)
    x = torch.randn(512, 256)
    y = torch.randint(0, 256, (512,))
    for lr in (1e-3, "tensor"):
        refcomp.reset()
        _, step = setup(lr=lr)
        report = refcomp.explain(step, x, y)
        print(f"lr={lr}: graphs {report.graph_count}  breaks {len(report.break_reasons)}")
        for b in report.break_reasons:
            print(f"  {b['id']}: {str(b.get('reason', ''))[:110]}")
        refcomp.reset()
        _, eager = setup(lr=lr)
        _, step = setup(lr=lr)
        compiled = refcomp.compile(step)
        e = cpu_per_step(eager, (x, y))
        c = cpu_per_step(compiled, (x, y))
        print(f"  CPU ms/step: eager {e * 1e3:.1f}  compiled {c * 1e3:.1f}  eager/compiled"
              f" {e / c:.2f}x; {refcomp.stats()['counters']}")
    refcomp.reset()
    e = cpu_per_step(post_backward(), ())
    c = cpu_per_step(refcomp.compile(post_backward()), ())
    print(f"after backward (clip + AdamW.step): eager {e * 1e3:.2f}  compiled {c * 1e3:.2f}"
          f"  eager/compiled {e / c:.2f}x (machine shared, 1 thread)")


if __name__ == "__main__":
    main()
