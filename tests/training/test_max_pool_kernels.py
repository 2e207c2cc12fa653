"""max_pool2d whose windows tile its input runs as a kernel (the `decompose` rule, Note
[Max pooling in kernels] in ir/passes/decompose.py): ATen's scan over each window, so
values, signed zeros, NaNs and the gradient's choice among ties equal eager's bitwise;
the backward stays ATen's, its indices found through the channels-last kernel (issue 35).
"""

import pytest
import torch
import torch.nn.functional as F

import refcomp
from codegen.stats import STATS
from ir.builder import GraphBuilder
from ir.passes.decompose import decompose
from ir.types import TensorType, f32


def _awkward(shape, seed):
    """Ties (ReLU's zeros, repeated values), NaNs, -inf and -0.0 in one tensor."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).round().relu()
    flat = x.view(-1)
    n = flat.numel()
    pick = torch.randperm(n, generator=g)
    flat[pick[: n // 20]] = float("nan")
    flat[pick[n // 20: n // 10]] = float("-inf")
    flat[pick[n // 10: n // 5]] = -0.0
    return x


def _pool(x, k):
    return F.max_pool2d(x * 1.0, k)


@pytest.mark.parametrize("k", [2, (2, 3), 4])
def test_pool_equals_eager_bitwise(k):
    x = _awkward((2, 3, 8, 12), seed=sum(k) if isinstance(k, tuple) else k)
    step = refcomp.compile(_pool, backend="llvm")
    outs = []
    for fn in (_pool, step):
        xx = x.clone().requires_grad_()
        y = fn(xx, k)
        y.backward(torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) - 5)
        outs.append((y.detach(), xx.grad))
    (want, want_grad), (got, got_grad) = outs
    assert torch.equal(got.nan_to_num(), want.nan_to_num())
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.signbit(), want.signbit())
    assert torch.equal(got_grad, want_grad)


def test_tiling_pool_is_a_kernel_and_overlapping_one_an_extern():
    b = GraphBuilder("pools")
    x = b.input("x", TensorType(f32, (2, 3, 8, 8)))
    tiled = b.max_pool2d(x, kernel_size=[2, 2], stride=[2, 2])
    overlapping = b.max_pool2d(x, kernel_size=[3, 3], stride=[2, 2])
    graph = decompose(b.build([tiled, overlapping]))
    ops = [n.op.name for n in graph.nodes]
    assert ops.count("max_pool2d") == 1 and "where" in ops, ops


def test_cnn_step_pools_in_kernels():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 4 * 4, 5))
    x = torch.randn(4, 3, 8, 8)
    compiled = refcomp.compile(model, backend="llvm")
    before = STATS.extern_nodes
    compiled(x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad)
    # the convolution and its weight's gradient (x needs none), the pool's gradient and
    # the linear layer's three matmuls: no forward max_pool2d extern (before: 7)
    assert STATS.extern_nodes - before == 6
