"""Entries flagged `ir_meta` (See Note [IR-typed meta]): their result's meta tensor comes
from the IR type, not from torch's meta kernel.  Each still equals eager in value, dtype,
shape and requires_grad, in one graph; so does the kernel torch would have run on meta."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp
from refcomp.tracer import torch_table
from refcomp.tracer.torch_table import TABLE


def _x():
    return torch.randn(4, 8)


CASES = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5), 3),
    "layer_norm_no_affine": (lambda x: F.layer_norm(x, (8,)), 1),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, torch.full((8,), 0.1), torch.ones(8), w, b,
                                                False, 0.1, 1e-5), 3),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1), 1),
    "gelu": (lambda x: F.gelu(x), 1),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), 1),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), 1),
    "linear": (lambda x, w, b: F.linear(x, w.expand(8, 8), b), 3),
    "normalize": (lambda x: F.normalize(x, dim=-1), 1),
    "vector_norm": (lambda x: torch.linalg.vector_norm(x, dim=-1), 1),
    "norm": (lambda x: torch.norm(x), 1),
    "mean_std": (lambda x: x.mean(-1) + x.std(-1), 1),
    "cat_stack": (lambda x, w: torch.cat([x, torch.stack([w, w])]), 2),
    "where_clamp": (lambda x: torch.where(x > 0, x, 0.5).clamp(0.1, 1.0), 1),
    "masked_fill": (lambda x: x.masked_fill(x < 0, 0.0), 1),
    "pointwise": (lambda x, w: (1 - x.exp().rsqrt() / 2) ** 2 + torch.maximum(x, w).relu(), 2),
    "scalar_sides": (lambda x: 1 / (x.abs() + 1) + 2 ** x, 1),
    "comparisons": (lambda x, w: ((x > w) & (x <= 1)), 2),
}


def _args(n, requires_grad):
    torch.manual_seed(0)
    args = [_x()] + [torch.randn(8) for _ in range(n - 1)]
    return [a.requires_grad_(requires_grad and i > 0) for i, a in enumerate(args)]


def _check(got, want):
    assert (got.dtype, got.shape, got.requires_grad) == \
        (want.dtype, want.shape, want.requires_grad)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_ir_meta_entries_equal_eager(name, requires_grad):
    f, n = CASES[name]
    args = _args(n, requires_grad)
    report = refcomp.explain(f, *args, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    _check(report.result, f(*args))
    _check(refcomp.compile(f)(*args), f(*args))  # the default (compiled) backend too
    with torch.device("meta"):  # what the skipped meta run would have said
        meta = f(*[a.detach().to("meta").requires_grad_(a.requires_grad) for a in args])
    assert (meta.dtype, meta.shape) == (report.result.dtype, report.result.shape)


@pytest.mark.parametrize("model", ["layer_norm", "conv_bn", "transformer"])
def test_ir_meta_models_equal_eager(model):
    torch.manual_seed(0)
    if model == "layer_norm":
        m, x = nn.LayerNorm(16), torch.randn(4, 16)
    elif model == "conv_bn":
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
                          nn.GELU(), nn.LogSoftmax(dim=-1))
        x = torch.randn(2, 3, 8, 8)
    else:
        m, x = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0), torch.randn(5, 2, 16)
    m.eval()
    with torch.no_grad():
        _check(refcomp.compile(m)(x), m(x))


def test_ints_still_take_the_meta_run(monkeypatch):
    """Integer operands are not IR-typed: the meta run types them (promotion, refusals)."""
    assert TABLE[torch.add].ir_meta

    def refuse(*args):
        raise AssertionError("an integer operand took the IR-typed path")

    monkeypatch.setattr(torch_table, "_call_ir_typed", refuse)
    x = torch.arange(6, dtype=torch.int32)
    report = refcomp.explain(lambda a: (a * 3 - a).clamp(min=2) // 2, x, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    _check(report.result, (x * 3 - x).clamp(min=2) // 2)


# The eager backend runs batch_norm, layer_norm, log_softmax and masked_fill as
# decomposed ATen ops that follow the input's memory order, where eager's own kernel
# returns row-major: the entry makes such outputs row-major (Note [Output layout] in
# refcomp/runtime.py; corpus pointwise_of_contiguous_copy_strides is the same class).
def _stride_cases():
    for name in sorted(CASES):
        for backend in ["interp", "eager", "llvm"]:
            yield pytest.param(name, backend, id=f"{name}-{backend}")


@pytest.mark.parametrize("name, backend", list(_stride_cases()))
def test_ir_meta_entries_keep_eager_strides(name, backend):
    """The skipped meta run would also have given eager's strides: with a transposed first
    operand, the result's strides equal eager's (a pointwise entry follows its operands'
    memory order; the others are row-major or whatever torch's kernel picks)."""
    f, n = CASES[name]
    args = _args(n, False)
    args[0] = args[0].t().contiguous().t()  # the same values, column-major
    want = f(*args)
    got = refcomp.compile(f, backend=backend)(*args)
    _check(got, want)
    assert got.stride() == want.stride()


_W = torch.randn(4, 3, 3, 3)
CHANNELS_LAST_CASES = {
    "conv2d": lambda x: F.conv2d(x, _W, padding=1),
    "conv_relu_max_pool": lambda x: F.max_pool2d(F.relu(F.conv2d(x, _W)), 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d_1": lambda x: F.adaptive_avg_pool2d(x, 1),
    "adaptive_avg_pool2d_3": lambda x: F.adaptive_avg_pool2d(x, 3),
    "interpolate": lambda x: F.interpolate(x, scale_factor=2),
    "batch_norm_eval": lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3)),
    "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: F.group_norm(x, 3),
    "softmax": lambda x: x.softmax(1),
    "cat": lambda x: torch.cat([x, x], 1),
    "pad": lambda x: F.pad(x, (1, 1, 1, 1)),
}


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name", sorted(CHANNELS_LAST_CASES))
def test_channels_last_inputs_keep_eager_strides(name, backend):
    """A channels_last image through the usual CNN ops: values and strides as eager's
    (`adaptive_avg_pool2d` to 3x3 came back row-major: an `ir_meta` entry without the
    channels_last rule)."""
    f = CHANNELS_LAST_CASES[name]
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    want = f(x)
    refcomp.reset()
    got = refcomp.compile(f, backend=backend)(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert [s for n, s in zip(got.shape, got.stride()) if n > 1] == \
        [s for n, s in zip(want.shape, want.stride()) if n > 1]
