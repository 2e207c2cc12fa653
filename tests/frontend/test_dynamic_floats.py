"""Automatic dynamic floats: a float whose value changed is a graph input from the next
compile on (Note [Dynamic floats] in refcomp/tracer/dynamic_floats.py; spec/guards.md,
"Python float values")."""

import copy

import pytest
import torch

import refcomp
from refcomp import guards as G


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def counters():
    return refcomp.stats()["counters"]


def guard_texts(entry):
    return [g.describe() for g in entry.guards.guards]


@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_a_changed_float_argument_becomes_an_input_after_one_recompile(backend):
    def f(x, scale):
        return x * scale + (1 - scale * 0.25) / 3 - (-scale) ** 2 + 2.0 ** scale

    cf = refcomp.compile(f, backend=backend)
    x = torch.randn(16)
    for s in (0.1, 0.2, 0.3, 1e-8, -2.5, float("inf")):
        torch.testing.assert_close(cf(x, s), f(x, s), rtol=0, atol=0, equal_nan=True)
    static, dyn = cf.cache.entries
    assert static.hits == 0 and dyn.hits == 4
    assert "type(L['scale']) is float" in guard_texts(dyn)
    assert not any(g.kind == G.EQUALS_MATCH and "scale" in g.describe()
                   for g in dyn.guards.guards)
    assert dyn.notes[0] == ("automatic dynamic: L['scale'] is a graph input (its value"
                            " changed since an earlier compile)")
    assert [str(v.type) for v in dyn.graph.inputs] == ["f32[16]", "f64[]"]
    assert counters()["automatic_dynamic_floats"] == 1
    assert counters()["graphs"] == 2 and "limit_hits" not in counters()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bfloat16,
                                   torch.float16, torch.float64])
def test_a_dynamic_float_operand_has_eagers_dtype_and_value(dtype):
    # eager computes a Python float with a tensor as a wrapped number: an int tensor's
    # `* s` is float32, a 0-d float32 tensor stays float32, and a half tensor's mul and
    # division compute in float32 with the float as given (not rounded to half first).
    def f(t, z, s):
        return t * s, s * t, t / s, t + s, t - s * 2, z * s, torch.mul(t, s)

    def g(t, s):
        return t ** s

    cf, cg = refcomp.compile(f, backend="llvm"), refcomp.compile(g, backend="llvm")
    t = (torch.arange(1, 9) * 3).to(dtype)
    z = torch.tensor(0.7)
    for s in (0.1, 0.3, 1e5 / 3, 1.7):
        got, want = cf(t, z, s), f(t, z, s)
        for i, (a, b) in enumerate(zip(got, want)):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        # pow is within an ulp of eager's, as with a constant exponent
        torch.testing.assert_close(cg(t, s), g(t, s))
    assert len(cf.cache.entries) == 2, refcomp.stats()["frames"]
    half = dtype in (torch.float16, torch.bfloat16)
    # a half tensor's pow by a float is not modelled: static, as before
    assert len(cg.cache.entries) == (4 if half else 2)
    assert any("stays static: torch pow" in n for n in cg.cache.entries[1].notes) == half
    assert counters()["automatic_dynamic_floats"] == 2


def test_in_place_ops_and_alpha_of_a_dynamic_float():
    def f(p, g, a, b, lr, wd):
        p.mul_(1 - lr * wd)
        p.add_(g, alpha=-lr)
        p.addcdiv_(a, b, value=-lr / 2)
        p.addcmul_(a, b, value=lr)
        return p.sub(g, alpha=lr)

    cf = refcomp.compile(f, backend="llvm")
    base = [torch.randn(8) for _ in range(3)] + [torch.rand(8) + 1]
    for lr in (0.1, 0.05, 0.025, 0.3):
        mine = [t.clone() for t in base]
        theirs = [t.clone() for t in base]
        got, want = cf(*mine, lr, 0.01), f(*theirs, lr, 0.01)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(mine[0], theirs[0])
    assert len(cf.cache.entries) == 2


def test_foreach_ops_with_dynamic_float_scalars():
    def f(xs, ys, s):
        torch._foreach_mul_(xs, s)
        torch._foreach_add_(xs, ys, alpha=-s)
        return torch._foreach_mul(ys, [s, s * 2]), torch._foreach_add(xs, 1 - s)

    cf = refcomp.compile(f, backend="llvm")
    for s in (0.5, 0.25, 0.125):
        mine = [[torch.randn(4) for _ in range(2)] for _ in range(2)]
        theirs = copy.deepcopy(mine)
        torch.testing.assert_close(cf(*mine, s), f(*theirs, s), rtol=0, atol=0)
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    assert len(cf.cache.entries) == 2


@pytest.mark.parametrize("use", [
    "branch", "int", "round", "format", "container", "return", "attribute", "math", "compare",
    "size", "divisor"])
def test_a_use_that_needs_the_value_keeps_the_float_static(use):
    import math

    class Holder:
        last = None

    holder, seen = Holder(), []

    def f(x, s):
        if use == "branch":
            return x * s if s > 1 else x - s
        if use == "int":
            return x * int(s * 10)
        if use == "round":
            return x + round(s, 1)
        if use == "format":
            return x + len(f"{s:.3f}")
        if use == "container":
            seen.append(s * 2)
            return torch.stack([x * v for v in [s, 2.0]])
        if use == "return":
            return x * s, s * 2
        if use == "attribute":
            holder.last = -s
            return x * s
        if use == "math":
            return x * math.sqrt(s)
        if use == "compare":
            return x * (s == 0.5)
        if use == "size":
            return torch.zeros(int(s * 10)) + x.sum()
        if use == "divisor":
            return x * (1 / s)

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    for s in (0.5, 1.5, 0.3, 2.5):
        got, want = cf(x, s), f(x, s)
        torch.testing.assert_close(got, want)
        if use == "attribute":
            assert holder.last == -s and type(holder.last) is float
        if use == "container":
            assert seen[-1] == s * 2 and type(seen[-1]) is float
    assert "limit_hits" not in counters()
    notes = [n for e in cf.cache.entries for n in e.notes]
    assert any(n.startswith("automatic dynamic: L['s'] stays static:") for n in notes), notes
    # each new value is an entry of its own, guarded by value, as before
    assert any("L['s'] == 0.3" in guard_texts(e) for e in cf.cache.entries)


def test_dynamic_false_and_a_marked_frame_keep_floats_static():
    cf = refcomp.compile(lambda x, s: x * s, backend="eager", dynamic=False)
    x = torch.randn(3)
    for s in (0.1, 0.2, 0.3):
        torch.testing.assert_close(cf(x, s), x * s)
    assert len(cf.cache.entries) == 3 and "automatic_dynamic_floats" not in counters()

    refcomp.reset()
    cf = refcomp.compile(lambda x, s: x * s, backend="eager")
    cf(x, 0.1)
    with refcomp.set_stance("fail_on_recompile"):
        with pytest.raises(refcomp.RecompileError):
            cf(x, 0.2)  # the stance sees the miss before automatic dynamic grows
    cf(x, 0.3)
    with refcomp.set_stance("fail_on_recompile"):
        torch.testing.assert_close(cf(x, 0.4), x * 0.4)  # the dynamic entry serves it


def _train(opt_cls, sched, steps=12, compiled=True, **kw):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = opt_cls(m.parameters(), **kw)
    sch = sched(opt)

    def step():
        opt.step()

    run = refcomp.compile(step) if compiled else step
    x = torch.randn(4, 8)
    for _ in range(steps):
        m(x).square().sum().backward()
        run()
        sch.step()
        opt.zero_grad()
    return m, opt


_SCHEDULES = {
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 / (s + 1)),
    "step": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
}


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("opt_cls,kw", [
    (torch.optim.AdamW, {"lr": 0.1, "weight_decay": 0.01}),
    (torch.optim.Adam, {"lr": 0.1}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3}),
    (torch.optim.SGD, {"lr": 0.1}),
], ids=["adamw", "adam", "sgd_momentum", "sgd"])
@pytest.mark.parametrize("schedule", sorted(_SCHEDULES))
def test_an_lr_scheduler_compiles_the_step_twice(opt_cls, kw, foreach, schedule):
    m, opt = _train(opt_cls, _SCHEDULES[schedule], foreach=foreach, **kw)
    c = counters()
    # the first lr, then the dynamic one (SGD's momentum buffers, made by the first step,
    # are one more graph where the lr has not changed by then: StepLR)
    assert c["graphs"] == c["misses"] <= 3 and "limit_hits" not in c, c
    assert c["automatic_dynamic_floats"] == 1
    assert c.get("eager_calls", 0) == 0
    m2, opt2 = _train(opt_cls, _SCHEDULES[schedule], compiled=False, foreach=foreach, **kw)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p, q)
        for key, v in opt2.state[q].items():
            torch.testing.assert_close(opt.state[p][key], v)
    assert opt.param_groups[0]["lr"] == opt2.param_groups[0]["lr"]


def test_the_issue_35_repro_compiles_twice():
    m, opt = _train(torch.optim.AdamW, _SCHEDULES["lambda"], lr=0.1)
    c = counters()
    assert (c["misses"], c["graphs"], c["compiled_calls"]) == (2, 2, 12), c
    m2, opt2 = _train(torch.optim.AdamW, _SCHEDULES["lambda"], compiled=False, lr=0.1)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p, q)
        torch.testing.assert_close(opt.state[p]["exp_avg"], opt2.state[q]["exp_avg"])
        assert opt.state[p]["step"].item() == opt2.state[q]["step"].item() == 12


@pytest.mark.parametrize("numbers", [(2, 3), (0.5, 0.25)], ids=["int", "float"])
def test_a_dynamic_number_source_that_later_holds_a_tensor(numbers):
    # Regression: an argument automatic dynamic had made a number symbol or input (its
    # auto_dims entry "value"/"float") that later held a tensor was read as dims
    # {'v', 'a', ...}: RB018 (an internal TypeError) and the frame ran eagerly.
    cf = refcomp.compile(lambda x, n: x * n, backend="eager")
    x = torch.randn(4)
    for n in numbers + (torch.randn(4), torch.randn(2, 4), torch.randn(3, 4)):
        torch.testing.assert_close(cf(x, n), x * n)  # (its size changes: dims grow)
    assert all(e.graph is not None for e in cf.cache.entries), refcomp.stats()["frames"]
    assert "fallbacks" not in counters()


@pytest.mark.parametrize("live", ["source", "computed"])
def test_a_dynamic_float_across_a_graph_break(live):
    from tests.breaks import graph_break

    def f(x, s):
        y = x * s
        t = s * 2 if live == "computed" else s
        graph_break()
        return y * t + 1

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    for s in (0.5, 0.25, 0.125, 0.4, 0.7):
        torch.testing.assert_close(cf(x, s), f(x, s))
    entries = cf.cache.entries
    if live == "source":  # the resumed code reads it from its source: stays dynamic
        assert len(entries) == 2 and entries[1].hits == 3
        assert entries[1].notes == ["automatic dynamic: L['s'] is a graph input (its value"
                                    " changed since an earlier compile)"]
    else:  # a computed float handed to the resumed code needs its value: static
        assert len(entries) == 5
        assert entries[1].notes == ["automatic dynamic: L['s'] stays static: a use of a"
                                    " float computed from L['s'] that needs its value"]


def test_gradients_through_a_dynamic_float_scale():
    def f(x, w, s):
        return ((x @ w) * s - s * 0.5).tanh().sum() * (1 - s)

    cf = refcomp.compile(f)
    for s in (0.5, 0.25, 0.125, 0.4):
        x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True)
        x2, w2 = (t.detach().clone().requires_grad_() for t in (x, w))
        cf(x, w, s).backward()
        f(x2, w2, s).backward()
        torch.testing.assert_close(x.grad, x2.grad)
        torch.testing.assert_close(w.grad, w2.grad)
    assert len(cf.cache.entries) == 2 and cf.cache.entries[1].hits == 2


def test_a_float_pinned_once_is_traced_once_per_value(monkeypatch):
    import refcomp.api as api

    traces = []
    real = api.TraceContext

    def counted(*args, **kwargs):
        traces.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "TraceContext", counted)
    cf = refcomp.compile(lambda x, s: x * s if s > 1 else x - s, backend="eager")
    x = torch.randn(3)
    for s in (0.5, 0.25, 0.125, 2.5, 3.5):
        torch.testing.assert_close(cf(x, s), x * s if s > 1 else x - s)
    # 0.5; 0.25 dynamic, which needs its value, then static; each later value once
    assert len(traces) == 6 and len(cf.cache.entries) == 5
    assert cf.cache.entries[4].notes == ["automatic dynamic: L['s'] stays static:"
                                         " `L['s'] > 1` needs its value"]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("opt_cls,kw", [
    (torch.optim.RMSprop, {"lr": 0.01, "momentum": 0.5}),
    (torch.optim.Adagrad, {"lr": 0.1}),
    (torch.optim.NAdam, {"lr": 0.1}),
    (torch.optim.Adadelta, {"lr": 1.0}),
], ids=["rmsprop", "adagrad", "nadam", "adadelta"])
def test_other_optimizers_take_a_scheduled_lr_as_an_input(opt_cls, kw, foreach):
    m, opt = _train(opt_cls, _SCHEDULES["lambda"], steps=8, foreach=foreach, **kw)
    c = counters()
    assert c["graphs"] == 2 and "limit_hits" not in c, c
    m2, opt2 = _train(opt_cls, _SCHEDULES["lambda"], steps=8, compiled=False,
                      foreach=foreach, **kw)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p, q)
