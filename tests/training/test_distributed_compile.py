"""refcomp.compile around torch's distributed wrappers (gloo, 2 spawned CPU processes).

- `refcomp.compile(DDP(model))`, the torch.compile idiom: DDP's forward runs eagerly and
  the module it wraps is compiled (it compiled nothing: DDP's forward broke, RB004);
  gradients after each backward (all-reduced) and final parameters equal eager DDP's.
- FSDP2 (`fully_shard` on each block and the root): blocks compiled with refcomp, and the
  root compiled, train as eager FSDP2 does (its hooks, which all-gather and free the
  parameters, run eagerly around the compiled forward; they made the whole module eager).

One spawn runs every scenario (two interpreters importing torch cost most of the time);
each test reads its scenario's result.  Spec: spec/autograd.md, "DistributedDataParallel
and FSDP2"; refcomp/distributed.py.
"""

from __future__ import annotations

import copy
import os
import socket
import time
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

STEPS = 3
WORLD = 2
DEADLINE_S = 90  # the whole spawn: ~10 s unloaded; a hang fails instead of stalling CI


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.block0, self.block1, self.out = \
            nn.Linear(8, 16), Block(16), Block(16), nn.Linear(16, 4)

    def forward(self, x):
        return self.out(self.block1(self.block0(self.inp(x))))


def _data(rank):
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own shard
    return torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)


def _graphs():
    import refcomp

    return sum(1 for es in refcomp.stats()["frames"].values() for e in es
               if e["training"] is not None)


def _ddp(rank):
    from torch.nn.parallel import DistributedDataParallel as DDP

    import refcomp

    torch.manual_seed(0)
    model = Net()
    x, y = _data(rank)
    runs = []
    for compiled in (False, True):
        ddp = DDP(copy.deepcopy(model))
        run = refcomp.compile(ddp) if compiled else ddp
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        grads = []
        for _ in range(STEPS):
            opt.zero_grad()
            nn.functional.mse_loss(run(x), y).backward()
            grads.append([p.grad.clone() for p in ddp.parameters()])
            opt.step()
        runs.append((grads, [p.detach().clone() for p in ddp.parameters()]))
    report = refcomp.explain(run, x)
    return runs, (report.graph_count, [b["id"] for b in report.break_reasons]), _graphs()


def _fsdp(rank, how):
    from torch.distributed.fsdp import fully_shard

    import refcomp

    torch.manual_seed(0)
    model = Net()
    x, y = _data(rank)
    runs = []
    for compiled in (False, True):
        net = copy.deepcopy(model)
        fully_shard(net.block0)
        fully_shard(net.block1)
        fully_shard(net)
        run = net
        if compiled and how == "blocks":
            net.block0, net.block1 = refcomp.compile(net.block0), refcomp.compile(net.block1)
        elif compiled:
            run = refcomp.compile(net)
        opt = torch.optim.AdamW(net.parameters(), lr=0.01)
        losses = []
        for _ in range(STEPS):
            opt.zero_grad()
            loss = nn.functional.mse_loss(run(x), y)
            loss.backward()
            losses.append(loss.detach())
            opt.step()
        runs.append((losses, [p.full_tensor().detach() for p in net.parameters()]))
    return runs, _graphs()


def _worker(rank, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        import refcomp

        for name, run in (("ddp", lambda: _ddp(rank)),
                          ("fsdp_blocks", lambda: _fsdp(rank, "blocks")),
                          ("fsdp_root", lambda: _fsdp(rank, "root"))):
            refcomp.reset()
            try:
                results[(name, rank)] = ("ok", run())
            except Exception:  # reported to the parent, which fails that test
                results[(name, rank)] = ("error", traceback.format_exc())
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results():
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo not built")
    with mp.get_context("spawn").Manager() as manager:
        shared = manager.dict()
        procs = mp.start_processes(_worker, args=(_free_port(), shared), nprocs=WORLD,
                                   join=False, start_method="spawn")
        deadline = time.monotonic() + DEADLINE_S
        while not procs.join(timeout=1):
            if time.monotonic() > deadline:
                for p in procs.processes:
                    p.kill()
                pytest.fail(f"the {WORLD} processes did not finish in {DEADLINE_S} s")
        return dict(shared)


def _result(results, name, rank):
    status, value = results[(name, rank)]
    assert status == "ok", f"rank {rank}:\n{value}"
    return value


@pytest.mark.parametrize("rank", range(WORLD))
def test_compile_of_ddp_compiles_the_wrapped_module(results, rank):
    (eager, compiled), (graph_count, breaks), graphs = _result(results, "ddp", rank)
    for step, (a, b) in enumerate(zip(compiled[0], eager[0])):
        for ga, gb in zip(a, b):
            torch.testing.assert_close(ga, gb, msg=f"rank {rank} step {step}")
    for pa, pb in zip(compiled[1], eager[1]):
        torch.testing.assert_close(pa, pb)
    assert graph_count == 1 and breaks == [], (graph_count, breaks)
    assert graphs >= 1  # a compiled training graph served the steps


@pytest.mark.parametrize("how", ["blocks", "root"])
@pytest.mark.parametrize("rank", range(WORLD))
def test_fsdp2_trains_compiled_as_eager(results, rank, how):
    (eager, compiled), graphs = _result(results, f"fsdp_{how}", rank)
    torch.testing.assert_close(torch.stack(compiled[0]), torch.stack(eager[0]))
    for pa, pb in zip(compiled[1], eager[1]):
        torch.testing.assert_close(pa, pb)
    # each compiled block is a training graph (blocks); the root compiles its own
    # graphs around the blocks', which break there and compile as frames of their own
    assert graphs >= 2, graphs
