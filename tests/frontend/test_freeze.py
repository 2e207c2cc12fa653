"""options={"freeze": True}: parameters as compile-time values, batch norms folded, guarded.

Spec: spec/guards.md, "Freezing".
"""

import math

import pytest
import torch
import torch.nn as nn

import refcomp
from refcomp import guards as G

FREEZE = {"freeze": True}


@pytest.fixture(autouse=True)
def fresh_caches():
    refcomp.reset()  # models of one class share a code object, hence a cache


class ConvBNReLU(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class LinearBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)
        self.bn = nn.BatchNorm1d(5)

    def forward(self, x):
        return torch.tanh(self.bn(self.fc(x)))


def randomized(model):
    """Non-trivial statistics, so that a batch norm left out would be noticed."""
    torch.manual_seed(0)
    with torch.no_grad():
        for bn in (m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)):
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.normal_()
            bn.bias.normal_()
    return model.eval()


def entry_of(compiled):
    return compiled._compiled_forward.last_entry


@pytest.mark.parametrize("backend", [None, "eager", "interp"])
def test_conv_bn_relu_folds_and_equals_eager(backend):
    model = randomized(ConvBNReLU())
    cm = refcomp.compile(model, backend=backend, options=FREEZE)
    x = torch.randn(2, 8, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    graph = entry_of(cm).graph
    # No batch_norm nor its decomposition (rsqrt/sqrt, sub, mul on the activations).
    # Folded W' and b' are tensors the entry passes; the parameters are inputs no more.
    if backend == "interp":  # no prepacked calls (Note [Prepacked weights])
        assert graph.op_counts() == {"conv2d": 1, "expand": 1, "add": 1, "relu": 1}, str(graph)
        assert [v.type.shape for v in graph.inputs] == [(2, 8, 6, 6), (8, 8, 3, 3),
                                                        (1, 8, 1, 1)]
    else:  # one oneDNN call: the folded bias and the relu are its epilogue
        assert graph.op_counts() == {"aten": 1}, str(graph)
        (node,) = graph.nodes
        assert node.attrs["fn"] == "torch.ops.mkldnn._convolution_pointwise.default"
        assert "'relu'" in node.attrs["args"]
        assert [v.type.shape for v in graph.inputs] == [(2, 8, 6, 6), (8, 8, 3, 3), (8,)]


def test_without_freeze_the_batch_norm_stays():
    model = randomized(ConvBNReLU())
    cm = refcomp.compile(model, backend="eager")
    with torch.no_grad():
        cm(torch.randn(2, 8, 6, 6))
    graph = entry_of(cm).graph
    assert len(graph.inputs) == 7 and "batch_norm" not in graph.op_counts()
    assert {"rsqrt", "sqrt"} & set(graph.op_counts()), str(graph)  # decomposed, unfolded


def test_linear_batch_norm_1d_folds():
    model = randomized(LinearBN())
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(7, 6)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    graph = entry_of(cm).graph
    assert graph.op_counts() == {"matmul": 1, "expand": 1, "add": 1, "tanh": 1}, str(graph)
    (note,) = [n for n in entry_of(cm).notes if n.startswith("freeze")]
    assert "6 tensor(s) frozen" in note and "1 batch norm(s) folded" in note


@pytest.mark.parametrize("model", [nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)),
                                   nn.Sequential(nn.Conv2d(2, 3, 1, bias=False),
                                                 nn.BatchNorm2d(3))])
def test_batch_norm_returned_by_the_graph_folds(model):
    model = randomized(model)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(5, 4) if isinstance(model[0], nn.Linear) else torch.randn(2, 2, 3, 3)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    counts = entry_of(cm).graph.op_counts()
    if x.dim() == 2:
        assert counts.keys() == {"matmul", "expand", "add"}, counts
    else:  # the folded bias is the oneDNN convolution's (Note [Prepacked weights])
        assert counts == {"aten": 1}, counts


def test_in_place_change_of_a_frozen_weight_recompiles():
    model = randomized(ConvBNReLU())
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 8, 6, 6)
    with torch.no_grad():
        cm(x)
        version = model.conv.weight._version
        model.conv.weight.add_(1)          # what optimizer.step() does
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    cache = cm._compiled_forward.cache
    assert len(cache.entries) == 2
    assert cache.miss_reasons == [(0, [f"L['self'].conv.weight._version == {version}"])]
    kinds = [g.kind for g in cache.entries[1].guards.guards]
    assert kinds.count(G.TENSOR_VERSION) == 6


def test_replaced_or_reloaded_weights_recompile():
    model = randomized(ConvBNReLU())
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 8, 6, 6)
    with torch.no_grad():
        cm(x)
        model.bn.weight = nn.Parameter(torch.randn(8))  # same metadata, another tensor
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
        reasons = cm._compiled_forward.cache.miss_reasons
        assert reasons == [(0, ["L['self'].bn.weight is the frozen tensor (it was replaced)"])]
        state = {k: torch.randn_like(v) if v.is_floating_point() else v
                 for k, v in model.state_dict().items()}
        state["bn.running_var"] = state["bn.running_var"].abs()
        model.load_state_dict(state)       # copy_ into every tensor: versions move
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    assert len(cm._compiled_forward.cache.entries) == 3


def test_training_mode_refuses_then_eval_freezes():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).train()
    cm = refcomp.compile(model, backend="interp", options=FREEZE)  # no prepacked calls
    x = torch.randn(1, 3, 5, 5)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x))
        report = refcomp.explain(cm, x)
    (note,) = [n for n in report.notes if n.startswith("freeze")]
    assert note.startswith("freeze refused: getattr(L['self'], '0') is in training mode"), note
    assert len(entry_of(cm).graph.inputs) == 3  # x, weight, bias: nothing frozen
    model.eval()                               # the `training` guard fails: now it freezes
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x))
    # Only the bias is read at compile time (reshaped once); the weight stays an input
    # read at every call, so it needs no version guard.
    notes = entry_of(cm).notes
    assert "freeze: 1 tensor(s) frozen (getattr(L['self'], '0').bias)" in notes[0], notes
    versioned = [g.name for g in entry_of(cm).guards.guards if g.kind == G.TENSOR_VERSION]
    assert versioned == ["getattr(L['self'], '0').bias"]


def test_grad_mode_with_trainable_parameters_refuses_and_keeps_gradients():
    model = randomized(LinearBN())
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(7, 6)
    out = cm(x)                            # grad mode on, parameters require grad
    assert out.requires_grad
    out.sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, want in zip(got, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)
    notes = entry_of(cm).notes
    assert any(n.startswith("freeze refused: grad mode is on and") and "requires grad" in n
               for n in notes), notes
    report = refcomp.explain(cm, x)
    assert any("freeze refused" in n for n in report.notes), str(report)


def test_grad_mode_with_frozen_parameters_still_differentiates_the_input():
    model = randomized(ConvBNReLU()).requires_grad_(False)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    cm(x).square().sum().backward()
    got = x.grad.clone()
    x.grad = None
    model(x).square().sum().backward()
    torch.testing.assert_close(got, x.grad, rtol=1e-5, atol=1e-5)
    assert "batch_norm" not in entry_of(cm).graph.op_counts()


class ParamOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4))
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)                 # a mutated buffer is never frozen
        return self.w.t() * 2, x @ self.w.t() + self.calls


def test_outputs_computed_from_parameters_are_fresh_and_mutated_buffers_stay_live():
    model = ParamOutputs()
    twin = ParamOutputs()
    twin.load_state_dict(model.state_dict())
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(3):
            got, want = cm(x), twin(x)
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g, w)
            got[0].zero_()                 # the caller owns its outputs
    torch.testing.assert_close(model.calls, twin.calls)
    assert len(cm._compiled_forward.cache.entries) == 1  # the buffer has no version guard


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_freeze_option_values_are_checked(value):
    with pytest.raises(ValueError, match="freeze must be True or False"):
        refcomp.compile(nn.Linear(2, 2), options={"freeze": value})


# --- Note [Prepacked weights] (refcomp/freeze.py) ---------------------------------------------
class ConvGELU(nn.Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1)
        self.approximate = approximate

    def forward(self, x):
        return torch.nn.functional.gelu(self.conv(x), approximate=self.approximate)


def _aten_fns(cm):
    return [n.attrs["fn"] for n in entry_of(cm).graph.nodes if n.op.name == "aten"]


def test_conv_epilogue_equals_the_same_convolution_then_eagers_activation():
    """The fused post-ops are exact: relu, gelu (erf) and the bias give, bit for bit,
    what eager's op gives on the oneDNN convolution's own output."""
    model = ConvGELU().eval()
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 4, 9, 9)
    with torch.no_grad():
        out = cm(x)
        conv = model.conv
        plain = torch.ops.mkldnn._convolution_pointwise(
            x, conv.weight, conv.bias, [1, 1], [2, 2], [1, 1], 1, "none", [], None)
        assert torch.equal(out, torch.nn.functional.gelu(plain))
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    assert _aten_fns(cm) == ["torch.ops.mkldnn._convolution_pointwise.default"]
    assert out.is_contiguous()  # NCHW, as eager's


def test_tanh_gelu_is_not_fused_into_the_convolution():
    model = ConvGELU("tanh").eval()
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 4, 9, 9)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    graph = entry_of(cm).graph
    assert "gelu" in graph.op_counts(), str(graph)  # a kernel after the call


class BigLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_large_linear_runs_mkls_packed_gemm_with_the_bias_and_activation_after_it():
    torch.manual_seed(0)
    model = BigLinear().eval()
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(16, 1024)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
        x2 = torch.randn(16, 1024)
        torch.testing.assert_close(cm(x2), model(x2), rtol=1e-5, atol=1e-5)
        xt = torch.randn(1024, 16).t()  # a transposed (non-contiguous) input
        torch.testing.assert_close(cm(xt), model(xt), rtol=1e-5, atol=1e-5)
    assert _aten_fns(cm) == ["torch.ops.mkl._mkl_linear.default"]
    assert {"add", "relu"} <= set(entry_of(cm).graph.op_counts())
    versioned = [g.name for g in entry_of(cm).guards.guards if g.kind == G.TENSOR_VERSION]
    assert "L['self'].fc.weight" in versioned  # packed from its value: guarded
    with torch.no_grad():
        model.fc.weight.mul_(0.5)  # a changed weight recompiles and repacks
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)


def test_small_linear_keeps_atens_matmul():
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU()).eval()
    cm = refcomp.compile(model, options=FREEZE)
    with torch.no_grad():
        x = torch.randn(8, 64)
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    assert _aten_fns(cm) == [] and "matmul" in entry_of(cm).graph.op_counts()


def test_an_input_requiring_grad_gets_no_prepacked_call_and_its_gradient():
    """torch's prepacked ops have no autograd formula: with grad mode on and an input that
    requires grad, the conv stays conv2d, differentiable."""
    model = ConvGELU().eval().requires_grad_(False)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    out = cm(x)
    assert _aten_fns(cm) == []
    (g,) = torch.autograd.grad(out.sum(), x)
    x2 = x.detach().requires_grad_()
    (want,) = torch.autograd.grad(model(x2).sum(), x2)
    torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)


def test_a_later_input_requiring_grad_recompiles_without_the_prepacked_call():
    model = ConvGELU().eval().requires_grad_(False)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 4, 9, 9)
    cm(x)  # grad mode on, nothing requires grad: prepacked
    assert _aten_fns(cm) == ["torch.ops.mkldnn._convolution_pointwise.default"]
    x2 = x.clone().requires_grad_()
    out = cm(x2)  # x's requires_grad is guarded: a new entry, differentiable
    assert out.requires_grad and _aten_fns(cm) == []
    (g,) = torch.autograd.grad(out.sum(), x2)
    x3 = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(model(x3).sum(), x3)
    torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)


def test_interp_backend_gets_no_prepacked_call():
    model = BigLinear().eval()
    cm = refcomp.compile(model, backend="interp", options=FREEZE)
    with torch.no_grad():
        x = torch.randn(2, 1024)
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    assert _aten_fns(cm) == []


class StridedBiasConvReLU(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        with torch.no_grad():  # a bias that is a view with stride 2 (say, of a packed state)
            self.conv.bias = nn.Parameter(torch.randn(2 * c)[::2])

    def forward(self, x):
        return torch.relu(self.conv(x))


def test_a_strided_conv_bias_reaches_onednn_contiguous():
    """torch.ops.mkldnn._convolution_pointwise reads its bias as if contiguous (a bias with
    stride 2 gave results off by ~2.4, an expanded one ~1e23, torch 2.13): the bias must
    reach it contiguous (freezing makes it so, and the aten runner lays operands out
    row-major).  Equal to eager's conv2d with that bias (the same oneDNN convolution,
    the bias applied inside it) followed by relu."""
    model = StridedBiasConvReLU().eval()
    assert not model.conv.bias.is_contiguous()
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(4, 16, 20, 20)
    with torch.no_grad():
        out = cm(x)
        assert torch.equal(out, model(x))
    assert _aten_fns(cm) == ["torch.ops.mkldnn._convolution_pointwise.default"]


# --- Note [Channels-last convolutions] (refcomp/freeze.py) ---------------------------------
class ResBlock(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + x)


def _conv_layouts(cm):
    return [n.attrs.get("layouts", "") for n in entry_of(cm).graph.nodes
            if n.op.name == "aten"]


def _big_copies(prof, numel):
    """Copies of a tensor of `numel` elements that the profiler saw (the activations)."""
    return [e for e in prof.events() if e.name == "aten::copy_"
            and any(s and math.prod(s) == numel for s in e.input_shapes)]


CL = torch.channels_last


def test_channels_last_conv_runs_in_that_format_without_copies():
    model = randomized(ConvBNReLU(16)).to(memory_format=CL)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 16, 12, 12).contiguous(memory_format=CL)
    with torch.no_grad():
        out = cm(x)
        want = model(x)
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
        assert out.stride() == want.stride()  # channels_last, as eager's
        with torch.profiler.profile(record_shapes=True) as prof:
            cm(x)
    (layouts,) = _conv_layouts(cm)
    assert layouts.startswith("0:2304,1,192,16"), layouts  # the input's, named
    assert entry_of(cm).keep_layout == frozenset({0})  # no contiguity pass for x
    assert not _big_copies(prof, x.numel()), "an activation was copied"
    with torch.no_grad():  # a row-major input later: laid out for the call, still right
        x2 = torch.randn(2, 16, 12, 12)
        torch.testing.assert_close(cm(x2), model(x2), rtol=1e-5, atol=1e-5)
        assert cm(x2).stride() == model(x2).stride()


def test_channels_last_chain_stays_in_that_format_and_equals_eager():
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()).eval().to(memory_format=CL)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 8, 10, 10).contiguous(memory_format=CL)
    with torch.no_grad():
        out, want = cm(x), model(x)
        with torch.profiler.profile(record_shapes=True) as prof:
            cm(x)
    assert torch.equal(out, want) and out.stride() == want.stride()
    assert [lay.split(";")[0] for lay in _conv_layouts(cm)] == ["0:800,1,80,8", "0:1600,1,160,16"]
    assert not _big_copies(prof, out.numel()) and not _big_copies(prof, x.numel())


def test_channels_last_conv_read_by_a_kernel_stays_nchw():
    """A kernel reads its operands row-major: a channels_last result there would cost
    torch's transposing copy, so the block's convolutions run NCHW (as without the note)."""
    model = randomized(ResBlock()).to(memory_format=CL)
    cm = refcomp.compile(model, options=FREEZE)
    x = torch.randn(2, 16, 10, 10).contiguous(memory_format=CL)
    with torch.no_grad():
        out, want = cm(x), model(x)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    assert out.stride() == want.stride()
    assert len(_conv_layouts(cm)) == 2
    assert not any(lay.startswith("0:") for lay in _conv_layouts(cm)), _conv_layouts(cm)


def test_row_major_model_names_no_layout():
    model = randomized(ConvBNReLU(16))
    cm = refcomp.compile(model, options=FREEZE)
    with torch.no_grad():
        cm(torch.randn(2, 16, 12, 12))
    assert _conv_layouts(cm) == [""]
    assert entry_of(cm).keep_layout == frozenset()
