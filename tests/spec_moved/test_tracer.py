"""Worked examples moved out of spec/tracer.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_using_refcomp_compile():
    """spec/tracer.md, "Using refcomp.compile"."""
    import torch
    import torch.nn as nn

    import refcomp

    def f(x, y):
        return torch.relu(x @ y) + 1

    cf = refcomp.compile(f, backend="interp")        # lazy: nothing is traced yet
    x, y = torch.randn(4, 5), torch.randn(5, 3)
    torch.testing.assert_close(cf(x, y), f(x, y))   # first call: trace, compile, run
    assert len(cf.cache.entries) == 1

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    cm = refcomp.compile(model)                      # default backend: "llvm" if registered
    assert cm._orig_mod is model and list(cm.state_dict()) == list(model.state_dict())
    with torch.no_grad():
        x = torch.randn(3, 4)
        torch.testing.assert_close(cm(x), model(x), atol=1e-5, rtol=1e-5)


@as_module
def test_using_refcomp_compile_2():
    """spec/tracer.md, "Using refcomp.compile"."""
    import functools

    import torch
    import torch.nn.functional as F

    import refcomp

    class Scale:
        def __init__(self, k):
            self.k = k
        def __call__(self, x):
            return x * self.k

    x = torch.randn(4)
    for c in (functools.partial(torch.add, other=1.0), Scale(3.0), F.gelu):
        torch.testing.assert_close(refcomp.compile(c, backend="eager")(x), c(x))

    scale, shift = Scale(2.0), functools.partial(torch.sub, other=1.0)
    def uses_callables(x):
        tanh_gelu = functools.partial(F.gelu, approximate="tanh")
        return shift(scale(x)) + tanh_gelu(x)

    report = refcomp.explain(uses_callables, x, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    torch.testing.assert_close(report.result, uses_callables(x))


@as_module
def test_python_features():
    """spec/tracer.md, "Python features"."""
    import torch

    import refcomp

    def features(x, ys, scale=2):
        acc = []
        for i, y in enumerate(ys):
            acc.append(y * i)
        total = sum(acc) if len(acc) > 1 else x
        with torch.no_grad():
            frozen = x * scale
        helper = lambda t: t.relu() + scale
        return helper(total) + frozen, {"n": len(ys)}

    x, ys = torch.randn(3), [torch.randn(3) for _ in range(3)]
    report = refcomp.explain(features, x, ys, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    got, want = report.result, features(x, ys)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == {"n": 3}


@as_module
def test_opaque_torch_calls():
    """spec/tracer.md, "Opaque torch calls"."""
    import torch

    import refcomp

    def f(x, y):
        a = torch.addcmul(x, y, y, value=0.5)          # no table entry: one `aten` node
        v, m = torch.var_mean(a, dim=1)
        x.clamp_min_(0.0)                               # a written graph input
        return a, v, m, torch.diagonal(y)              # a view of the caller's tensor

    x, y = torch.randn(3, 3), torch.randn(3, 3)
    xe = x.clone()
    want = f(xe, y)
    refcomp.reset()
    report = refcomp.explain(f, x, y, backend="llvm")
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert 'fn="torch.addcmul"' in report.graphs[0] and "value=0.5" in report.graphs[0]
    for got, exp in zip(report.result, want):
        torch.testing.assert_close(got, exp)
    torch.testing.assert_close(x, xe)
    assert torch._C._is_alias_of(report.result[3], y)

    gen = torch.Generator().manual_seed(0)
    bad = refcomp.explain(lambda t: torch.bernoulli(t, generator=gen) * 2, torch.rand(4))
    assert bad.break_reasons[0]["id"] == "RB004" and "generator" in bad.break_reasons[0]["reason"]


@as_module
def test_classes_made_in_the_frame():
    """spec/tracer.md, "Classes made in the frame"."""
    import torch

    import refcomp

    def f(x):
        class Double(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.save_for_backward(t)
                return t * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        return Double.apply(x) + 1

    x = torch.randn(3)
    report = refcomp.explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    torch.testing.assert_close(report.result, x * 2 + 1)
    grad = refcomp.explain(f, x.clone().requires_grad_())
    assert "Double.apply" in grad.break_reasons[0]["reason"]


@as_module
def test_objects_made_in_the_frame():
    """spec/tracer.md, "Objects made in the frame"."""
    import torch

    import refcomp

    class KV:                      # a plain class: made symbolically, rebuilt after the graph
        def __init__(self):
            self.keys = None

        def update(self, k):
            self.keys = k if self.keys is None else torch.cat([self.keys, k])
            return self.keys

    def step(x):
        cache = KV()
        cache.update(x * 2)
        return cache.update(x + 1).sum(), cache

    x = torch.randn(2, 3)
    report = refcomp.explain(step, x, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    total, cache = report.result
    assert type(cache) is KV
    torch.testing.assert_close(cache.keys, torch.cat([x * 2, x + 1]))
    torch.testing.assert_close(total, torch.cat([x * 2, x + 1]).sum())


@as_module
def test_deep_copies():
    """spec/tracer.md, "Deep copies"."""
    import copy

    import torch

    import refcomp

    class Config:
        def __init__(self):
            self.layers, self.decoder_layers, self.names = 2, 3, ["a", "b"]

    def forward(x, config):
        text = copy.deepcopy(config)   # computed while tracing; config's deep state guarded
        text.layers = text.decoder_layers
        text.names.append("c")         # the copy's own list: config's is untouched
        for _ in range(text.layers):
            x = x * len(text.names)
        return x

    x, config = torch.ones(2), Config()
    report = refcomp.explain(forward, x, config, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    torch.testing.assert_close(report.result, x * 27)
    assert config.layers == 2 and config.names == ["a", "b"]


@as_module
def test_random_draws():
    """spec/tracer.md, "Random draws"."""
    import torch
    from torch.testing._utils import wrapper_set_seed

    import refcomp

    def f(p):
        a = wrapper_set_seed(torch.bernoulli, p)       # seeded, then the state restored
        return a, torch.normal(p, 1.0), torch.randn(2, 3)

    p = torch.rand(2, 3)
    report = refcomp.explain(f, p, backend="llvm")
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert 'fn="torch.manual_seed", args="42"' in report.graphs[0]
    refcomp.reset()
    compiled = refcomp.compile(f, backend="llvm")
    torch.manual_seed(0)
    got = compiled(p)
    got_state = torch.get_rng_state()
    torch.manual_seed(0)
    want = f(p)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert torch.equal(got_state, torch.get_rng_state())


@as_module
def test_which_reason_a_call_gets():
    """spec/tracer.md, "Which reason a call gets"."""
    import torch

    import refcomp
    from refcomp.resume import all_entries

    def reason_of(fn, *args):
        refcomp.reset()
        f = refcomp.compile(fn, backend="eager")
        try:
            f(*args)
        except (RuntimeError, IndexError) as e:
            raised = type(e)                 # eager's own error, from the call at the break
        (entry,) = all_entries(f.cache)
        return entry.reason.rid, raised

    a, b = torch.ones(2, 3), torch.ones(4, 3)
    assert reason_of(lambda x, y: torch.mm(x, y), a, a) == ("RB017", RuntimeError)
    assert reason_of(lambda x, y: x + y, a, b) == ("RB013", RuntimeError)
    assert reason_of(lambda x, y: torch.addcmul(x, y, y), a, b) == ("RB004", RuntimeError)
    assert reason_of(lambda x: x.cumsum(5), a) == ("RB004", IndexError)

    refcomp.reset()
    unfold = refcomp.compile(lambda x: x.unfold(0, 2, 1) + 1, backend="eager")
    for n in (3, 4, 5):                      # the third size hits the symbolic entry
        unfold(torch.randn(n, n))            # an opaque view: not typed over symbols
    (dynamic,) = [e for e in all_entries(unfold.cache) if e.reason]
    assert dynamic.reason.rid == "RB013" and dynamic.hits == 1
