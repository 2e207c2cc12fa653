"""Tracer features: Python constructs captured into one graph, and those that fall back
with their reason id; mutation write-back; autograd; fullgraph; disable."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refcomp


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _copy(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def run_both(f, *args, backend="eager", **kwargs):
    """explain(f) on copies of args; check results and argument mutations equal eager."""
    eager_args, comp_args = _copy(args), _copy(args)
    want = f(*eager_args, **kwargs)
    report = refcomp.explain(f, *comp_args, backend=backend, **kwargs)
    for g, w in zip(_flat(report.result), _flat(want), strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, equal_nan=True)
            assert g.dtype == w.dtype and g.shape == w.shape
        else:
            assert g == w
    for a, b in zip(comp_args, eager_args):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b)  # in-place effects reached the caller
    return report


def closures(x, y):
    k = 3

    def inner(t, scale=2):
        return t * scale + k

    g = lambda t: inner(t, scale=4)  # noqa: E731
    return g(x) + inner(y)


def loops(x, ys, d):
    out = x
    for i, y in enumerate(ys):
        out = out + y * i
    for a, b in zip(ys, ys[::-1]):
        out = out - a * b
    for _, v in d.items():
        out = out + v
    return out, len(ys)


def no_grad_block(x, w):
    with torch.no_grad():
        z = x * 2
    return z + w.sum().detach(), z


def inplace(x, y):
    x.add_(1)
    y[0] = 5.0
    y[1:3, 1] = x[0, :2] * 0
    x *= 2
    return x * 2


def indexing(x, i):
    return x[0], x[:, 1:3], x[..., None, -1], x[1::2], x[i], x[torch.tensor([0, 2])]


def methods(x):
    a = x.view(2, -1).permute(1, 0).reshape(-1).unsqueeze(0)
    b = x.transpose(0, 1).contiguous().flatten()
    c = x.float().double().to(torch.float16).to(torch.float32)
    d = torch.cat([x, x * 2], dim=1)
    e = torch.stack([x, x], 0).sum(0)
    v, idx = x.max(dim=1)
    return (a, b, c, d, e, v, idx, x.mean(), x.std(dim=0), x.var(0, keepdim=True),
            F.softmax(x, -1), x.argmax(), x.clamp(-0.5, 0.5), x.amax((0, 1)), x.T, x.size(1))


def promotion(x, n, b):
    return (x + n, x * 2.5, n + 1.5, x / 3, n // 2, (x > 0) & b, n.sum() + x,
            torch.where(b, n, 1.5), x ** 2, 2 ** x, n.double().sum() * x, -n, ~b)


def star_args(*args, **kwargs):
    return sum(args) * kwargs["k"]


def shapes_steer(x):
    if x.dim() == 2 and x.shape[0] > 2 and x.is_contiguous():
        return x.sum(dim=-1, keepdim=True).expand(x.shape) * 1
    return x


CAPTURED = [(closures, lambda: (torch.randn(4, 4), torch.randn(4, 4))),
            (loops, lambda: (torch.randn(4, 4), [torch.randn(4, 4) for _ in range(3)],
                             {"a": torch.randn(4, 4)})),
            (no_grad_block, lambda: (torch.randn(4, 4), torch.randn(3))),
            (inplace, lambda: (torch.randn(4, 4), torch.randn(4, 4))),
            (indexing, lambda: (torch.randn(4, 4), 2)),
            (methods, lambda: (torch.randn(4, 4),)),
            (promotion, lambda: (torch.randn(4, 4), torch.randint(-5, 5, (4, 4)),
                                 torch.rand(4, 4) > 0.5)),
            (star_args, lambda: (torch.randn(3), torch.randn(3))),
            (shapes_steer, lambda: (torch.randn(4, 3),))]


@pytest.mark.parametrize("backend", ["eager", "interp"])
@pytest.mark.parametrize("f,make", CAPTURED, ids=[f.__name__ for f, _ in CAPTURED])
def test_constructs_are_captured_as_one_graph(f, make, backend):
    kwargs = {"k": 2} if f is star_args else {}
    report = run_both(f, *make(), backend=backend, **kwargs)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)


def try_block(x):
    try:
        return x + 1
    except Exception:
        return x


def test_a_try_block_is_traced_along_its_normal_path():
    report = refcomp.explain(try_block, torch.ones(2), backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    torch.testing.assert_close(report.result, torch.full((2,), 2.0))


def generator(x):
    yield x


def prints(x):
    print("side effect")  # replayed after the graph (spec/runtime.md, "Side effects")
    return x


SOME_GLOBAL = 0


def bumps_global(x):
    global SOME_GLOBAL
    SOME_GLOBAL += 1  # a number the frame writes is read outside the graph (a break)
    return x


def item(x):
    return x * x.sum().item()


def tensor_if(x):
    if x.sum() > 0:
        return x
    return -x


def mutates_attribute(x, box):
    box.value += 1  # as bumps_global
    return x


def bool_mask(x):
    return x[x > 0]


def where_of_condition_alone(x):  # torch.where(cond) is nonzero: RB022, not RB017 (issue 37)
    return torch.where(x > 0)[0] + 1


def inplace_on_view(x):
    v = x.as_strided((2,), (2,))  # a view no IR index map inverts (x[0] is captured)
    v.add_(1)
    return x


@refcomp.disable
def kept_eager(x):
    return x + 1


def calls_disabled(x):
    return kept_eager(x) * 2


class Box:
    value = 0


FALLBACKS = [(generator, "RB014"), (bumps_global, "RB008"), (item, "RB002"), (tensor_if, "RB003"),
             (mutates_attribute, "RB008"), (bool_mask, "RB022"), (inplace_on_view, "RB010"),
             (calls_disabled, "RB016"), (where_of_condition_alone, "RB022")]


@pytest.mark.parametrize("f,rid", FALLBACKS, ids=[f.__name__ for f, _ in FALLBACKS])
def test_unsupported_constructs_break_or_fall_back_with_reason(f, rid, capsys):
    args = (torch.randn(4), Box()) if f is mutates_attribute else (torch.randn(4),)
    report = refcomp.explain(f, *args, backend="eager")
    assert report.graph_break_count == 1  # a graph break (spec/runtime.md) or a fallback
    if f is not generator:
        torch.testing.assert_close(report.result, f(*args))
    reason = report.break_reasons[0]
    assert reason["id"] == rid
    assert reason["where"].startswith(__file__)
    with pytest.raises(refcomp.CaptureError, match=rid):
        refcomp.compile(f, backend="eager", fullgraph=True)(*args)


def test_eager_fallback_is_cached_and_runs_once_per_call(capsys):
    cf = refcomp.compile(prints, backend="eager")
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(cf(x), x)
    assert capsys.readouterr().out.count("side effect") == 3
    assert len(cf.cache.entries) == 1 and cf.cache.entries[0].hits == 2


def test_disable_keeps_a_compiled_function_eager():
    cf = refcomp.compile(kept_eager, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), x + 1)
    assert cf.cache.entries == []


def test_gradients_flow_like_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    twin = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    twin.load_state_dict(model.state_dict())
    cm = refcomp.compile(twin, backend="interp")
    x = torch.randn(3, 4)
    model(x).square().sum().backward()
    report = refcomp.explain(cm, x)
    assert any("autograd" in n for n in report.notes)
    cm(x).square().sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_detach_then_differentiable_use_is_captured():
    # was RB011; the gradients: tests/training/test_stopped_gradients.py
    w = torch.randn(3, requires_grad=True)

    def f(x):
        return x.detach() * w  # eager: no gradient into x's history; w gets one

    report = refcomp.explain(f, w * 2, backend="eager")
    assert (report.graph_count, report.break_reasons) == (1, [])


def test_module_wrapper_keeps_the_module_interface():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 5 * 5, 3), nn.Softmax(dim=-1))
    cm = refcomp.compile(model, backend="eager")
    assert cm._orig_mod is model
    assert list(cm.state_dict()) == list(model.state_dict())
    assert [p is q for p, q in zip(cm.parameters(), model.parameters())] == [True] * 6
    cm.eval()
    assert not model.training
    x = torch.randn(2, 3, 5, 5)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x))
        cm.train()
        assert model.training
        # Training BatchNorm is compiled (spec/autograd.md): batch statistics, and the
        # running statistics updated by the compiled call as by the eager one.
        twin = copy.deepcopy(model)
        torch.testing.assert_close(cm(x), twin(x))
        for a, b in zip(model.state_dict().values(), twin.state_dict().values()):
            torch.testing.assert_close(a, b)
    entries = cm._compiled_forward.cache.entries
    assert [e.reason is None for e in entries] == [True, True]


def test_embedding_and_modulelist():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 1), "b": nn.Tanh()})

        def forward(self, idx):
            h = self.emb(idx)
            for layer in self.layers:
                h = F.silu(layer(h)) + h
            return self.heads["a"](self.heads["b"](h))

    torch.manual_seed(0)
    m = M()
    idx = torch.randint(0, 10, (2, 5))
    with torch.no_grad():
        report = run_both(m.forward, idx)
    assert report.graph_count == 1


def test_contiguous_copy_is_not_an_alias_of_its_input():
    def f(x):
        y = x.contiguous()  # a copy when x is not contiguous, x itself when it is
        y.add_(1)
        return y

    for x in (torch.zeros(3, 4), torch.zeros(4, 3).t()):
        run_both(f, x)  # checks results and that x changed exactly as in eager


def test_other_python_versions_fall_back_with_a_clear_reason(monkeypatch):
    import types

    from refcomp.tracer import frame

    monkeypatch.setattr(frame, "sys", types.SimpleNamespace(version_info=(3, 12, 0),
                                                            version="3.12.0 (fake)"))
    report = refcomp.explain(lambda x: x + 1, torch.ones(2), backend="eager")
    assert [r["id"] for r in report.break_reasons] == ["RB007"]
    assert "3.12.0" in report.break_reasons[0]["reason"]
    torch.testing.assert_close(report.result, torch.full((2,), 2.0))


def test_inplace_on_one_of_two_aliased_arguments_matches_eager():
    def f(a, b):
        a.add_(1)
        return b * 2

    cf = refcomp.compile(f, backend="eager")
    for make in (lambda x: (x, x.clone()), lambda x: (x, x), lambda x: (x, x[:])):
        x1, x2 = torch.zeros(3), torch.zeros(3)
        want = f(*make(x1))
        got = cf(*make(x2))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x2, x1)
    # distinct inputs compile (with a no-aliasing guard); aliased ones trace again and
    # fall back, since the in-place op would be seen through the other argument
    reasons = [e.reason.rid if e.reason else None for e in cf.cache.entries]
    assert reasons == [None, "RB010"]


def test_explain_of_a_function_of_no_arguments():
    # Regression (issue 35): `explain(step)()` returned another curried function (a
    # training step of globals, as an LR scheduler's tests write it, could not be explained)
    x = torch.randn(3)

    def step():
        return torch.relu(x) * 2

    report = refcomp.explain(step)()
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    torch.testing.assert_close(report.result, step())


def test_explain_curried_form_and_stats():
    def f(x):
        return torch.relu(x) * 2

    x = torch.randn(3)
    curried = refcomp.explain(f)(x)
    direct = refcomp.explain(f, x)
    assert str(curried).splitlines()[:2] == str(direct).splitlines()[:2] == [
        "Graph Count: 1", "Graph Break Count: 0"]
    before = refcomp.stats()["counters"].get("compiled_calls", 0)
    cf = refcomp.compile(f, backend="eager")
    for _ in range(3):
        cf(x)
    stats = refcomp.stats()
    (frame,) = [v for k, v in stats["frames"].items() if k.startswith("f (")]
    assert frame[0]["hits"] == 2 and frame[0]["guard_checks"] == 2  # first call: traced
    assert frame[0]["guard_time_us_per_check"] > 0
    assert stats["counters"]["compiled_calls"] - before == 3


@pytest.mark.parametrize("move", [
    lambda x, m: m.to(device=x.device, dtype=torch.bool),  # transformers' mask prep
    lambda x, m: m.to(x.device),
    lambda x, m: m.to("cpu", torch.float64),
])
def test_to_the_same_device_traces(move):
    # Regression: the meta call ran `meta_tensor.to(device=cpu)`, which has no data to
    # copy, so `.to(device=...)` was an RB017 break (every transformers mask, RoPE).
    def f(x, m):
        return (x + 1) * move(x, m)

    x, m = torch.ones(3), torch.tensor([1.0, 0.0, 2.0])
    report = refcomp.explain(f, x, m, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    torch.testing.assert_close(refcomp.compile(f, backend="llvm")(x, m), f(x, m))


def test_status_queries_answer_as_under_dynamo():
    # Regression (transformers' is_torchdynamo_compiling / is_tracing): each query was a
    # break (torch.compiler and torch.jit are on the inline skip list).  "Is torch.compile
    # tracing?" answers True while refcomp traces, as under Dynamo (transformers then skips
    # its data-dependent mask checks); export, TorchScript and stream capture answer as eager.
    def f(x):
        if torch.compiler.is_exporting() or torch.jit.is_tracing() or \
                torch.jit.is_scripting():
            return x - 1
        if torch.compiler.is_compiling() and torch.compiler.is_dynamo_compiling() and \
                torch._dynamo.is_compiling():
            return x * 3
        return x + 1

    report = refcomp.explain(f, torch.ones(2), backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    torch.testing.assert_close(report.result, torch.full((2,), 3.0))
    assert not torch.compiler.is_compiling()  # outside the trace: eager's answer


def test_is_compiling_answers_false_in_code_run_between_graphs():
    # A break runs its call in CPython, which is not tracing: there the query answers False,
    # as between Dynamo's graphs; the traced rest of the frame answers True.
    @refcomp.disable
    def asked_eagerly():
        return torch.compiler.is_compiling()

    def f(x):
        return x + asked_eagerly() + 2 * torch.compiler.is_compiling()

    report = refcomp.explain(f, torch.zeros(2), backend="eager")
    assert report.graph_break_count == 1, report.break_reasons
    torch.testing.assert_close(report.result, torch.full((2,), 2.0))


class _Cfg:
    impl = "paged|sdpa"


def test_methods_of_constant_strings_fold():
    # Regression (transformers' `attn_implementation.startswith("paged|")`): a break
    # whose message named the method "None.str.startswith".
    cfg = _Cfg()

    def f(x):
        if cfg.impl.startswith("paged|"):
            return x * len(cfg.impl.removeprefix("paged|"))
        return x

    report = refcomp.explain(f, torch.ones(2), backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    torch.testing.assert_close(report.result, torch.full((2,), 4.0))
    cfg.impl = "eager"  # guarded by value: a recompile, not a stale answer
    torch.testing.assert_close(refcomp.compile(f, backend="eager")(torch.ones(2)), torch.ones(2))


def _fg_inner(t):
    return t.sum().item()


def _fg_middle(t):
    return _fg_inner(t * 2) + 1


def test_fullgraph_error_shows_the_inlined_call_stack():
    def outer(x):
        return _fg_middle(x + 1)

    with pytest.raises(refcomp.CaptureError) as info:
        refcomp.compile(outer, fullgraph=True, backend="eager")(torch.ones(2))
    text = str(info.value)
    lines = text.splitlines()
    assert lines[0].startswith("[RB002]") and "Traced call stack" in lines[1]
    stack = lines[2:]
    assert [s.rsplit(" in ", 1)[1] for s in stack] == ["outer", "_fg_middle", "_fg_inner"]
    assert all(__file__ in s for s in stack)
    assert f"line {_fg_inner.__code__.co_firstlineno + 1}, in _fg_inner" in stack[-1]
    assert f"line {_fg_middle.__code__.co_firstlineno + 1}, in _fg_middle" in stack[1]
