"""Common real models capture as one graph with no breaks and equal eager.

Covers pooling (max_pool2d, avg_pool2d, adaptive_avg_pool2d), norms and normalize,
static split/chunk and the layout calls small CNNs and transformers use.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp

BACKENDS = [None, "eager"]  # None: the default backend (llvm)


def _one_graph(fn, *args, backend=None, atol=1e-5):
    with torch.no_grad():
        report = refcomp.explain(fn, *args, backend=backend)
        want = fn(*args)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    got = report.result
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
    else:
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-5, atol=atol)
    return report


class SmallCNN(nn.Module):
    def __init__(self, functional):
        super().__init__()
        self.functional = functional
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        if self.functional:
            x = F.adaptive_avg_pool2d(F.max_pool2d(x, 2), (1, 1))
            x = torch.flatten(x, 1)
        else:
            x = self.gap(self.pool(x)).flatten(1)
        return F.log_softmax(self.fc(x), dim=1)


def _cnn(functional):
    torch.manual_seed(0)
    model = SmallCNN(functional).eval()
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    return model


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("functional", [False, True])
def test_small_cnn_is_one_graph_and_equals_eager(functional, backend):
    model = _cnn(functional)
    report = _one_graph(model, torch.randn(2, 3, 12, 12), backend=backend)
    (graph,) = report.graphs
    # the 2x2 pool tiles its input: `decompose` writes it as selects over strided slices
    # on the kernel backends (Note [Max pooling in kernels])
    pooled = "max_pool2d" in graph or ("slice" in graph and "isnan" in graph)
    assert pooled and "mean" in graph, graph


def test_small_cnn_compiled_twice_hits_the_cache():
    model = _cnn(True)
    compiled = refcomp.compile(model)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 12, 12)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


POOLS = [
    lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
    lambda x: F.max_pool2d(x, (2, 3), dilation=(2, 1)),
    lambda x: F.max_pool2d(x[0], 2),  # CHW input
    lambda x: F.avg_pool2d(x, 2),
    lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    lambda x: F.adaptive_avg_pool2d(x, 1),
    lambda x: F.adaptive_avg_pool2d(x, (3, None)),  # divides the input: avg_pool2d
    nn.AvgPool2d(2, stride=1, padding=1),
    nn.MaxPool2d(3, 1, 1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", range(len(POOLS)))
def test_pooling_is_one_graph_and_equals_eager(index, backend):
    torch.manual_seed(index)
    _one_graph(POOLS[index], torch.randn(2, 3, 9, 10), backend=backend)


@pytest.mark.parametrize("fn", [
    lambda x: F.adaptive_avg_pool2d(x, 4),  # 4 does not divide 9
    lambda x: F.max_pool2d(x, 2, return_indices=True),
    lambda x: F.avg_pool2d(x, 2, divisor_override=3),
    lambda x: F.max_pool2d(x.long(), 2),
])
def test_pooling_forms_beyond_the_ir_are_opaque_calls(fn):
    # Forms the IR's pooling ops do not model (RB013 in the table) land in the graph as
    # opaque torch calls (spec/tracer.md, "Opaque torch calls").
    x = torch.randn(2, 3, 9, 10)
    report = refcomp.explain(fn, x, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    assert "aten" in report.ops_per_graph[0]
    want = fn(x)
    for g, w in zip(report.result if isinstance(want, tuple) else [report.result],
                    want if isinstance(want, tuple) else [want]):
        torch.testing.assert_close(g, w)


def test_boolean_dispatch_functions_are_traced_through():
    # F.adaptive_max_pool2d is torch's `boolean_dispatch.<locals>.fn`: inlined, it picks
    # the indices-free form, an opaque torch call.
    x = torch.randn(1, 2, 4, 4)
    report = refcomp.explain(lambda x: F.adaptive_max_pool2d(x, 1), x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    torch.testing.assert_close(report.result, F.adaptive_max_pool2d(x, 1))


NORMS = [
    lambda x: x.norm(),
    lambda x: x.norm(dim=1),
    lambda x: x.norm(p=1, dim=-1, keepdim=True),
    lambda x: torch.norm(x, p=2, dim=(1, 2)),
    lambda x: torch.norm(x, dim=2, keepdim=True),
    lambda x: torch.linalg.vector_norm(x),
    lambda x: torch.linalg.vector_norm(x, ord=1, dim=(0, 2)),
    lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=-1),
    lambda x: torch.linalg.vector_norm(x, ord=3, dim=1, keepdim=True),
    lambda x: F.normalize(x),
    lambda x: F.normalize(x, p=1, dim=-1),
    lambda x: F.normalize(x * 0, dim=2),  # all zeros: the eps clamp keeps it finite
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", range(len(NORMS)))
def test_norms_are_one_graph_and_equal_eager(index, backend):
    torch.manual_seed(index)
    _one_graph(NORMS[index], torch.randn(3, 4, 5), backend=backend)


def test_norm_kinds_beyond_the_ir_are_opaque_calls():
    x = torch.randn(3, 4)
    report = refcomp.explain(lambda x: torch.linalg.vector_norm(x, ord=0), x, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    assert "aten" in report.ops_per_graph[0]
    torch.testing.assert_close(report.result, torch.linalg.vector_norm(x, ord=0))


LAYOUT = [
    lambda x: torch.flatten(x, 1, 2),
    lambda x: x.flatten(1),
    lambda x: x.view(-1, 5),
    lambda x: torch.transpose(x, 0, 2),
    lambda x: x.mT,
    lambda x: x.chunk(2, dim=1),
    lambda x: torch.chunk(x, 3, dim=-1),
    lambda x: x.split(2, dim=2),
    lambda x: torch.split(x, [1, 3], dim=1),
    lambda x: torch.stack([x, x * 2], dim=1),
    lambda x: x.split(1)[0] + x.split(1)[2],
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", range(len(LAYOUT)))
def test_layout_calls_are_one_graph_and_equal_eager(index, backend):
    torch.manual_seed(index)
    _one_graph(LAYOUT[index], torch.randn(3, 4, 5), backend=backend)


ENCODER_CASES = [(norm_first, activation, batch_first)
                 for norm_first in (False, True) for activation in ("relu", "gelu")
                 for batch_first in (True, False)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("norm_first,activation,batch_first", ENCODER_CASES)
def test_transformer_encoder_layer_is_one_graph(norm_first, activation, batch_first, backend):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first).eval()
    _one_graph(layer, torch.randn(2, 5, 16), backend=backend)


class Encoder(nn.Module):
    """Two encoder layers under a user module, with a causal mask."""

    def __init__(self, mask_kind):
        super().__init__()
        self.mask_kind = mask_kind
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(16, 2, 24, dropout=0.0, batch_first=True,
                                       activation=F.gelu) for _ in range(2))

    def forward(self, x):
        n = x.shape[1]
        mask = torch.arange(n)[None, :] > torch.arange(n)[:, None]  # True: masked out
        if self.mask_kind == "float":
            mask = torch.zeros(n, n).masked_fill(mask, float("-inf"))
        for layer in self.layers:
            x = layer(x, src_mask=mask)
        return x


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_transformer_encoder_layers_with_a_mask_are_one_graph(mask_kind):
    torch.manual_seed(0)
    _one_graph(Encoder(mask_kind).eval(), torch.randn(2, 6, 16))


def test_transformer_encoder_layer_forms_not_captured_break_with_a_reason():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    x, pad = torch.randn(2, 3, 8), torch.tensor([[False, False, True], [False] * 3])

    def padded(x):
        return layer(x, src_key_padding_mask=pad)
    with torch.no_grad():
        report = refcomp.explain(padded, x, backend="eager")
        torch.testing.assert_close(report.result, padded(x), rtol=1e-5, atol=1e-5)
    assert [r["id"] for r in report.break_reasons] == ["RB013"], str(report)
    # dropout=0.1 in training was RB009; now captured (tests/training/test_attention_dropout.py)
