"""Worked examples moved out of spec/guards.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_which_fact_yields_which_guard():
    """spec/guards.md, "Which fact yields which guard"."""
    import enum

    import torch
    import torch.nn as nn

    import refcomp

    class Mode(enum.Enum):
        ADD = 1
        MUL = 2

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.LeakyReLU(0.1)])
            self.mode = Mode.ADD

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            if self.mode is Mode.ADD:
                x = x + 1
            return x * getattr(self, "gain", 1.0)

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(4)
    cm(x)
    for change in (lambda: m.layers.append(nn.Softmax(dim=0)),
                   lambda: setattr(m.layers[0], "negative_slope", 0.5),
                   lambda: setattr(m, "mode", Mode.MUL),
                   lambda: setattr(m, "gain", 3.0)):
        change()
        torch.testing.assert_close(cm(x), m(x))     # every change recompiles
    cache = cm._compiled_forward.cache
    assert len(cache.entries) == 5 and len(cache.history) == 4
    assert [str(f) for f in cache.history[0].failures[0][1]] == [
        "type(L['self'].layers._modules) is dict and len(L['self'].layers._modules) == 1"
        " (actual: dict of length 2)"]
    assert [str(f) for f in cache.history[1].failures[1][1]] == [
        "getattr(L['self'].layers, '0').negative_slope == 0.1 (actual: 0.5)"]
    assert "L['self'].mode is Mode.ADD (actual: another object: <Mode.MUL: 2>)" in str(
        cache.history[2])
    assert "hasattr(L['self'], 'gain') == False (actual: True)" in str(cache.history[3])

    cf = refcomp.compile(lambda x, d: x / d, backend="eager")
    assert torch.equal(cf(torch.ones(1), 0.0), torch.tensor([float("inf")]))
    assert torch.equal(cf(torch.ones(1), -0.0), torch.tensor([float("-inf")]))  # sign guarded


@as_module
def test_dynamic_sizes():
    """spec/guards.md, "Dynamic sizes"."""
    import torch

    import refcomp
    from refcomp import guards as G

    def f(x):
        n = x.shape[0]
        y = x.reshape(n, -1) * 2
        if n > 4:
            y = y + 1
        return y, n

    cf = refcomp.compile(f, backend="interp", dynamic=True)
    for n in (6, 9, 3, 7):
        x = torch.randn(n, 10, 11)                # every dim a symbol: s0, s1, s2
        got, want = cf(x), f(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] == n
    big, small = cf.cache.entries                 # n > 4 and n <= 4
    assert (big.hits, small.hits) == (2, 0) and str(big.graph.inputs[0].type) == "f32[s0,s1,s2]"
    assert any(g.kind == G.SHAPE_ENV and "(s0 > 4) is True" in g.describe()
               for g in big.guards.guards)


@as_module
def test_dynamic_sizes_2():
    """spec/guards.md, "Dynamic sizes"."""
    import torch

    import refcomp

    def f(x, w):
        return torch.softmax(x @ w, dim=-1).sum(1), x.shape[1] * 2

    cf = refcomp.compile(f, backend="eager")
    for n, k in ((4, 8), (5, 16), (3, 24)):
        x, w = torch.randn(n, k), torch.randn(k, 6)
        refcomp.mark_dynamic(x, [0, 1])               # any dim
        refcomp.mark_dynamic(w, 0)                    # k again: one symbol (duck sizing)
        got, want = cf(x, w), f(x, w)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    (entry,) = cf.cache.entries                      # one compile serves all three
    assert [str(v.type) for v in entry.graph.inputs] == ["f32[s0,s1]", "f32[s1,6]"]
    assert "L['x'].size(1) == L['w'].size(0) >= 2" in [g.describe() for g in entry.guards.guards]

    refcomp.reset()
    g = refcomp.compile(lambda x: x * 2, backend="eager")   # dynamic=None: automatic
    for n in (8, 16, 32):
        x = torch.randn(n, 3)
        torch.testing.assert_close(g(x), x * 2)
    static, dyn = g.cache.entries                    # two compiles; 32 hit the second
    assert (static.hits, dyn.hits) == (0, 1) and str(dyn.graph.inputs[0].type) == "f32[s0,3]"
    assert refcomp.stats()["counters"]["automatic_dynamic_dims"] == 1
    assert "automatic dynamic: L['x'].size(0)" in dyn.notes[0]

    refcomp.reset()
    h = refcomp.compile(lambda x, w: (x @ w).relu(), backend="eager", dynamic=True)
    x, w = torch.randn(5, 7, 8), torch.randn(8, 3)
    refcomp.mark_static(x, 0)                        # kept static in every mode
    (y,) = [h(x, w)]
    torch.testing.assert_close(y, (x @ w).relu())
    (entry,) = h.cache.entries
    assert str(entry.graph.inputs[0].type) == "f32[5,s0,s1]"   # w is an argument: symbolic too
    assert "L['x'].size(0) == 5 stays static (refcomp.mark_static)" in entry.notes[0]


@as_module
def test_dynamic_sizes_3():
    """spec/guards.md, "Dynamic sizes"."""
    import torch

    import refcomp
    from refcomp import guards as G

    def f(x, y):
        half = x[:, : x.shape[1] // 2]               # a size as a slice bound: symbolic
        return half[: y.shape[0]] * 2, x.size()[:-1] + (2,), x.narrow(0, -2, 2).sum(0)

    cf = refcomp.compile(f, backend="llvm", dynamic=True)
    for n in (5, 8, 11):
        x, y = torch.randn(n, n + 3), torch.randn(n - 2)
        got, want = cf(x, y), f(x, y)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[2], want[2])
        assert got[1] == want[1] and type(got[1]) is torch.Size
    (entry,) = cf.cache.entries                      # one graph, one kernel set, every size
    assert str(entry.graph.outputs[0].type) == "f32[s2,floor(s1/2)]"
    shape_guards = [g.describe() for g in entry.guards.guards if g.kind == G.SHAPE_ENV]
    assert "(s2 <= s0) is True  where s0 = L['x'].size(0), s2 = L['y'].size(0)" in shape_guards
    assert "(s0 - 2 >= 0) is True  where s0 = L['x'].size(0)" in shape_guards


@as_module
def test_dynamic_sizes_4():
    """spec/guards.md, "Dynamic sizes"."""
    import torch

    import refcomp
    from refcomp import resume

    @refcomp.disable                      # CPython runs it: a graph break (RB016)
    def log(*args):
        pass

    def f(x, w):
        y = (x @ w).relu()
        log(y.shape)                      # a graph break: the rest is a resume function
        return (y.softmax(-1) * 2).sum(1)

    cf = refcomp.compile(f, backend="eager")           # dynamic=None
    w = torch.randn(8, 5)
    for n in (4, 6, 8, 10):
        x = torch.randn(n, 8)
        torch.testing.assert_close(cf(x, w), f(x, w))
    (rf,) = resume.resume_functions(cf.cache).values()
    for cache in (cf.cache, rf.cache):                 # both: one recompile, then a symbol
        static, dyn = cache.entries
        assert (static.hits, dyn.hits) == (0, 2) and "s0" in str(dyn.graph.inputs[0].type)
    assert "automatic dynamic: L['y'].size(0) is s0" in rf.cache.entries[1].notes[0]


@as_module
def test_dynamic_sizes_5():
    """spec/guards.md, "Dynamic sizes"."""
    import torch

    import refcomp

    refcomp.reset()

    def first_n(x, n):
        return x[:n] * n + x.shape[0]

    cf = refcomp.compile(first_n, backend="llvm")          # dynamic=None
    x = torch.randn(20, 4)
    for n in range(2, 14):                                 # 12 values
        torch.testing.assert_close(cf(x, n), first_n(x, n))
    static, dyn = cf.cache.entries                         # one recompile, then a symbol
    assert (static.hits, dyn.hits) == (0, 10)
    assert [str(v.type) for v in dyn.graph.inputs] == ["f32[20,4]", "i64[s0,0]"]
    described = [g.describe() for g in dyn.guards.guards]
    assert "type(L['n']) is int" in described and "L['n'] >= 2" in described
    assert "(s0 <= 20) is True  where s0 = L['n']" in described
    assert dyn.notes == ["automatic dynamic: L['n'] is s0 (its value changed since an"
                         " earlier compile)"]
    assert refcomp.stats()["counters"]["automatic_dynamic_ints"] == 1
    for n in (0, 1):                                       # specialised, as in torch
        torch.testing.assert_close(cf(x, n), first_n(x, n))
    assert len(cf.cache.entries) == 4


def test_dynamic_sizes_6():
    """spec/guards.md, "Python float values"."""
    import torch

    import refcomp

    refcomp.reset()
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 / (s + 1))

    @refcomp.compile
    def step():
        opt.step()

    x = torch.randn(4, 8)
    for _ in range(12):                                    # 12 learning rates
        model(x).sum().backward()
        step()
        sched.step()
        opt.zero_grad()
    c = refcomp.stats()["counters"]
    assert (c["misses"], c["graphs"], c["automatic_dynamic_floats"]) == (2, 2, 1)
    assert "limit_hits" not in c and "eager_calls" not in c
    static, dyn = step.cache.entries
    described = [g.describe() for g in dyn.guards.guards]
    assert any(d.startswith("type(") and d.endswith(".param_groups[0]['lr']) is float")
               for d in described)                     # its type, not its value
    assert not any("param_groups[0]['lr'] ==" in d for d in described)
    assert "f64[]" in [str(v.type) for v in dyn.graph.inputs]  # the lr, read per call

    def scaled(x, s):
        return x * s if s > 1 else x - s                   # a branch on s: static

    cf = refcomp.compile(scaled, backend="eager")
    for s in (0.5, 0.25, 2.0):
        torch.testing.assert_close(cf(x, s), scaled(x, s))
    assert len(cf.cache.entries) == 3                      # each value by value
    assert cf.cache.entries[1].notes[0].startswith("automatic dynamic: L['s'] stays static")


@as_module
def test_options():
    """spec/guards.md, "Options"."""
    import torch

    import refcomp

    keep = lambda guards: [g.name != "L['n']" for g in guards]
    cf = refcomp.compile(lambda x, n: x * n, backend="eager", options={"guard_filter_fn": keep})
    x = torch.ones(2)
    assert torch.equal(cf(x, 2), x * 2)
    assert torch.equal(cf(x, 5), x * 2)   # the risk the filter accepted: n is baked in
    try:
        refcomp.compile(lambda x: x, options={"cache_size": 1})
        raise AssertionError("unknown option accepted")
    except ValueError as e:
        assert "valid options: backend_options, cache_size_limit" in str(e)
    try:
        refcomp.compile(lambda x: x, options={"passes": ["fold", "dcee"]})
        raise AssertionError("unknown pass accepted")
    except ValueError as e:
        assert "options['passes']: unknown pass 'dcee'" in str(e)


@as_module
def test_freezing():
    """spec/guards.md, "Freezing"."""
    import torch
    import torch.nn as nn

    import refcomp

    refcomp.reset()  # built-in modules share one code object, so one cache: start it empty
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].weight.normal_()
    cm = refcomp.compile(model, backend="eager", options={"freeze": True})
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
        entry = cm._compiled_forward.last_entry
        (conv,) = entry.graph.nodes                  # one oneDNN call, b' and relu its epilogue
        assert conv.attrs["fn"] == "torch.ops.mkldnn._convolution_pointwise.default"
        assert [str(v.type) for v in entry.graph.inputs] == [
            "f32[2,3,10,10]", "f32[8,3,3,3]", "f32[8]"]            # x, W', b'
        version = model[0].weight._version
        model[0].weight.add_(0.1)                                  # an optimizer step
        torch.testing.assert_close(cm(x), model(x), rtol=1e-5, atol=1e-5)
    cache = cm._compiled_forward.cache
    assert cache.miss_reasons == [(0, [f"getattr(L['self'], '0').weight._version == {version}"])]
    assert len(cache.entries) == 2


@as_module
def test_freezing_2():
    """spec/guards.md, "Freezing"."""
    import torch
    import torch.nn as nn

    import refcomp

    lin = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).eval()
    cm = refcomp.compile(lin, backend="eager", options={"freeze": True})
    x = torch.randn(5, 4)
    y = cm(x)                        # grad mode on, parameters require grad: not frozen
    assert y.requires_grad and len(cm._compiled_forward.last_entry.graph.inputs) == 7
    report = refcomp.explain(cm, x)
    assert any(n.startswith("freeze refused: grad mode is on") for n in report.notes), report
    with torch.no_grad():
        torch.testing.assert_close(cm(x), lin(x))                  # a new entry: frozen
    assert any(n.startswith("freeze: 6 tensor(s) frozen") for n in
               cm._compiled_forward.last_entry.notes)
    try:
        refcomp.compile(lin, options={"freeze": "yes"})
        raise AssertionError("freeze='yes' accepted")
    except ValueError as e:
        assert "freeze must be True or False" in str(e)


@as_module
def test_cache_and_recompiles():
    """spec/guards.md, "Cache and recompiles"."""
    import torch

    import refcomp
    from refcomp.lookup import shared_prefix

    def scale(x, n):
        return x * n

    cf = refcomp.compile(scale, backend="eager", dynamic=False)   # each n is an entry
    x = torch.randn(3)
    for n in (0.5, 0.25, 0.125, 0.5):
        torch.testing.assert_close(cf(x, n), x * n)
    entries = cf.cache.entries
    assert [e.hits for e in entries] == [1, 0, 0]
    # the load of n is shared; n's value is not, and grad mode etc. come after it
    assert shared_prefix([e.guards._codegen for e in entries]) == 1
    assert cf.cache.find.source_code.count("while True:") == 3     # one block per entry
    for _ in range(10):
        cf(x, 0.125)                                                # hits the third entry
    assert [e.guards.calls for e in entries] == [15, 12, 10]        # exact, though derived
    assert entries[0].guards.profile()[0]["failures"] == 14         # n == 0.5 failed 14 times


@as_module
def test_cache_and_recompiles_2():
    """spec/guards.md, "Cache and recompiles"."""
    import warnings

    import torch

    import refcomp

    cf = refcomp.compile(lambda x: x + 1, backend="eager", dynamic=False,  # every size recompiles
                         options={"cache_size_limit": 2})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 6):
            assert torch.equal(cf(torch.zeros(n)), torch.ones(n))   # eager past the limit
    assert len(cf.cache.entries) == 2
    (w,) = [w for w in caught if "cache_size_limit" in str(w.message)]
    assert "<lambda> (" in str(w.message) and "L['x'].shape[0] == 1 (last actual: 3)" in str(
        w.message) and "refcomp.mark_dynamic(x, 0)" in str(w.message)
    # Sizes 4 and 5 miss a full cache: they run eagerly without being explained again.
    assert [m.outcome for m in cf.cache.history] == ["recompiled", "eager: cache_size_limit"]
    assert refcomp.stats()["counters"]["limit_hits"] >= 3
    assert str(cf.cache.history[0]) == "miss 1 (recompiled): entry 0: L['x'].shape[0] == 1 (actual: 2)"


@as_module
def test_recompile_controls():
    """spec/guards.md, "Recompile controls"."""
    import torch

    import refcomp

    cf = refcomp.compile(lambda x, n: x * n, backend="eager")
    x = torch.ones(2)
    cf(x, 2)
    with refcomp.set_stance("fail_on_recompile"):
        assert torch.equal(cf(x, 2), x * 2)                 # a hit is fine
        try:
            cf(x, 3)
            raise AssertionError("recompiled under fail_on_recompile")
        except refcomp.RecompileError as e:
            assert "L['n'] == 2 (actual: 3)" in str(e)
    with refcomp.set_stance("eager_on_recompile"):
        assert torch.equal(cf(x, 4), x * 4) and len(cf.cache.entries) == 1
    calls = refcomp.stats()["counters"]["calls"]
    refcomp.set_stance("force_eager")
    assert torch.equal(cf(x, 5), x * 5) and refcomp.stats()["counters"]["calls"] == calls
    refcomp.set_stance("default")
    cf(x, 6)
    assert len(cf.cache.entries) == 2
    try:
        refcomp.set_stance("sometimes")
        raise AssertionError("bad stance accepted")
    except ValueError as e:
        assert "valid stances: default, fail_on_recompile" in str(e)


@as_module
def test_global_torch_state():
    """spec/guards.md, "Global torch state"."""
    import torch
    from torch.overrides import TorchFunctionMode

    import refcomp

    cf = refcomp.compile(lambda x, w: torch.relu(x @ w), backend="llvm")
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    cf(x, w)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = cf(x, w), torch.relu(x @ w)
    assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)
    entry = cf.last_entry                                  # traced, with the casts in it
    assert entry.graph is not None and entry.reason is None
    assert entry.graph.op_counts().get("cast") == 2       # x and w cast to bfloat16

    class Double(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return out * 2 if func is torch.relu else out

    want = torch.relu(x @ w)
    with Double():
        assert torch.equal(cf(x, w), want * 2)             # the mode ran: eager under it
    assert [e.reason.rid if e.reason else None for e in cf.cache.entries] == [None, None, "RB021"]
    assert "torch function modes [] (actual: torch function modes ['Double'])" in str(
        cf.cache.history[-1])
    cf(x, w)                                               # back outside: the first entry hits
    assert cf.cache.entries[0].hits == 1


@as_module
def test_guard_profile():
    """spec/guards.md, "Guard profile"."""
    import torch

    import refcomp

    def f(x, n):
        return x * n if n > 0 else x

    cf = refcomp.compile(f, backend="eager")
    x = torch.ones(3)
    for n in (1, 1, 1, -1, 1, -1):
        cf(x, n)
    rows = refcomp.stats()["frames"]
    (first, second), = [e for name, e in rows.items() if name.startswith("f (")]
    by_guard = {r["guard"]: r for r in first["guard_profile"]}
    n_row = by_guard["L['n'] == 1"]           # every check reached it; the misses failed there
    assert n_row["checks"] == first["guard_checks"] and n_row["failures"] > 0
    assert first["guard_checks"] - n_row["failures"] == first["hits"]
    (tensors,) = [r for r in first["guard_profile"] if r["kind"] == "TENSOR_MATCH"]
    assert tensors["checks"] == first["hits"] and tensors["failures"] == 0
    assert "L['n'] == 1" in refcomp.guard_profile() and "checks" in refcomp.guard_profile()
    assert all(r["time_us"] >= 0 for r in first["guard_profile"])
