"""The benchmark's refcomp-freeze candidate: the weights of a row as a module's buffers,
compiled with options={"freeze": True} (bench/harness.py, refcomp_freeze_candidate)."""

import torch
import torch.nn.functional as F

from bench import harness
from bench.workloads import WORKLOADS, Workload


def _conv_bn_relu(x, w, mean, var, gamma, beta):
    y = F.conv2d(x, w, padding=1)
    return torch.relu(F.batch_norm(y, mean, var, gamma, beta, training=False, eps=1e-5))


def _inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 4, 8, 8, generator=g), torch.randn(6, 4, 3, 3, generator=g) * 0.2,
            torch.randn(6, generator=g) * 0.1, torch.rand(6, generator=g) + 0.5,
            torch.rand(6, generator=g) + 0.5, torch.randn(6, generator=g) * 0.1)


def test_frozen_weights_give_eagers_result_and_fold_the_batch_norm():
    w = Workload("conv_bn_relu_small", _conv_bn_relu, _inputs, weights=True)
    results = {r.candidate: r for r in harness.run_workload(
        w, {"eager": harness.eager_candidate, "refcomp-freeze": harness.refcomp_freeze_candidate,
            "refcomp": harness.refcomp_candidate}, reps=1)}
    frozen = results["refcomp-freeze"]
    assert not frozen.error
    assert frozen.extra["max_abs_diff"] < 1e-5
    # Folded: the batch norm's arithmetic is gone, so the graph has one kernel fewer
    # (bias + relu) than the unfrozen graph's (batch norm + relu, conv bias none).
    assert frozen.kernels is not None and results["refcomp"].kernels is not None
    assert frozen.kernels < results["refcomp"].kernels


def test_the_frozen_module_reads_its_buffers_through_freeze():
    fn, _ = harness.refcomp_freeze_candidate(_conv_bn_relu)
    x, *weights = _inputs()
    out = fn(x, *weights)
    torch.testing.assert_close(out, _conv_bn_relu(x, *weights), rtol=1e-5, atol=1e-5)
    weights[0].mul_(2.0)  # a changed weight: TENSOR_VERSION fails, recompiled with the new one
    torch.testing.assert_close(fn(x, *weights), _conv_bn_relu(x, *weights), rtol=1e-5, atol=1e-5)


def test_rows_without_weights_skip_the_candidate():
    w = Workload("tiny_small", lambda x, y: x * y, lambda: (torch.ones(4), torch.ones(4)))
    results = {r.candidate: r for r in harness.run_workload(
        w, {"eager": harness.eager_candidate,
            "refcomp-freeze": harness.refcomp_freeze_candidate}, reps=1)}
    assert results["refcomp-freeze"].error == "no weights"
    assert {n for n, w in WORKLOADS.items() if w.weights} == {"mlp", "transformer2",
                                                              "conv_bn_relu"}
