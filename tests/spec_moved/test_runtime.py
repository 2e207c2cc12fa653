"""Worked examples moved out of spec/runtime.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_generated_code_at_a_break():
    """spec/runtime.md, "Generated code at a break"."""
    import dis
    import io

    import torch

    import refcomp
    from refcomp.resume import all_entries

    @refcomp.disable                  # CPython runs it: a graph break (RB016)
    def log(msg):
        print(msg)

    def between(x):
        y = x.cos()
        log("between")
        return y * 2

    refcomp.reset()
    f = refcomp.compile(between, backend="eager")
    torch.testing.assert_close(f(torch.ones(2)), between(torch.ones(2)))
    first, resumed = all_entries(f.cache)      # the frame's entry, its resume function's
    out = io.StringIO()
    dis.dis(first.resume.code, file=out)
    text = out.getvalue()
    print(text)
    #   PUSH_NULL / LOAD_FAST ___stack1 / LOAD_FAST ___stack2 / JUMP_FORWARD  (the prologue)
    #   ... the original instructions: the log call's PRECALL 1, CALL 1 run natively ...
    #   JUMP_FORWARD to a stub: BUILD_TUPLE, LOAD_CONST <resume between at line N>,
    #   LOAD_FAST y, CALL_FUNCTION_EX, RETURN_VALUE
    assert "LOAD_FAST                0 (___stack1)" in text and "CALL_FUNCTION_EX" in text
    assert "<resume between at line" in text
    assert first.graph.op_counts() == {"cos": 1} and resumed.graph.op_counts()
    assert first.reason.rid == "RB016" and resumed.reason is None


@as_module
def test_generated_code_at_a_break_2():
    """spec/runtime.md, "Generated code at a break"."""
    import torch

    import refcomp
    from refcomp.resume import all_entries

    def running_mean(x):
        total = 0.0
        for i in range(100):
            x = x * 0.5 + 1
            total += x.mean().item()          # a break in every iteration
        return x, total

    refcomp.reset()
    f = refcomp.compile(running_mean, backend="eager")
    for _ in range(3):
        x = torch.randn(4)
        got, want = f(x), running_mean(x)
        torch.testing.assert_close(got[0], want[0])
        assert abs(got[1] - want[1]) < 1e-3
    entries = all_entries(f.cache)
    assert len(entries) <= 3                  # the frame, the loop body, the loop's exit
    assert max(e.hits for e in entries) >= 3 * 99 - 2   # (nearly) every iteration


@as_module
def test_generated_code_at_a_break_3():
    """spec/runtime.md, "Generated code at a break"."""
    import torch

    import refcomp
    from refcomp.resume import all_entries

    def graphs(fn, x):
        refcomp.reset()
        f = refcomp.compile(fn, backend="eager")
        torch.testing.assert_close(f(x), fn(x))
        return [(e.reason and e.reason.rid, e.graph.op_counts()) for e in all_entries(f.cache)]

    def branch(x):
        y = x * 2 if x.sum() > 0 else x * 3       # the chosen product runs in CPython
        return y + 1

    def counted_loop(x):
        for i in range(int(x.sum().item())):      # resumes after item(): the loop is traced
            x = x + i
        return x.relu()

    def list_loop(x):
        for v in x.sum(0).tolist():               # resumes at the body: CPython iterates
            x = x + v
        return x.relu()

    assert graphs(branch, torch.ones(3))[0][0] == "RB003"
    assert [ops for _, ops in graphs(branch, torch.ones(3))][1] == {"full": 1, "add": 1}
    assert graphs(branch, -torch.ones(3))[1][1] == {"full": 1, "add": 1}   # the other branch
    assert graphs(counted_loop, torch.ones(3))[1] == (None, {"full": 3, "add": 3, "relu": 1})
    assert [rid for rid, _ in graphs(list_loop, torch.ones(2, 3))] == ["RB002", "RB019", None]


@as_module
def test_what_breaks_a_graph():
    """spec/runtime.md, "What breaks a graph"."""
    import torch

    import refcomp

    @refcomp.disable                        # CPython runs it: a graph break (RB016)
    def log(*args):
        print(*args)

    def helper(t):
        log("helper sees", tuple(t.shape))
        return t.exp()

    def caller(x):
        return helper(x + 1) * 2

    report = refcomp.explain(caller, torch.zeros(2))
    assert report.graph_count == 3          # x + 1 | exp (inside helper) | * 2
    assert report.graph_break_count == 1    # the log call (caller and helper stop there)
    assert report.break_reasons[0]["id"] == "RB016"
    torch.testing.assert_close(report.result, caller(torch.zeros(2)))


@as_module
def test_what_breaks_a_graph_2():
    """spec/runtime.md, "What breaks a graph"."""
    import torch

    import refcomp

    def checked(x, strict):
        y = x + 1
        if strict:
            raise ValueError("strict")
        return y

    refcomp.reset()
    f = refcomp.compile(checked, backend="eager")
    try:
        f(torch.ones(2), True)              # RB017: this entry runs the frame eagerly
    except ValueError:
        pass
    assert torch.equal(f(torch.ones(2), False), torch.full((2,), 2.0))   # compiled
    counters = refcomp.stats()["counters"]
    assert counters["fallbacks"] == 1 and counters["graphs"] == 1

    def bad_mm(x, y):
        return torch.mm(x, y) + 1
    try:                                     # explain() raises what the call raises
        refcomp.explain(bad_mm, torch.ones(2, 3), torch.ones(2, 3))
    except RuntimeError as e:
        assert "cannot be multiplied" in str(e)    # eager's message

    def make_counter():
        n = 0
        def step(x):
            nonlocal n
            n += 1                           # a store into a real cell: replayed
            return x + n
        return step

    step = make_counter()
    report = refcomp.explain(step, torch.zeros(1))
    assert report.graph_count == 1 and report.break_reasons == []
    assert step.__closure__[0].cell_contents == 1   # explain ran the call once


@as_module
def test_side_effects():
    """spec/runtime.md, "Side effects"."""
    import torch

    import refcomp
    from refcomp.resume import all_entries

    LOGGED = []
    STATE = {}

    class Box:
        pass

    box = Box()

    def logged(x, seen):
        y = x.sin()
        LOGGED.append(y)                 # a growing global log: no recompile
        seen.append(y.sum())             # a caller's list
        STATE["last"] = y
        box.scale = 2.0
        print("logged", tuple(y.shape))  # printed after the graph, once per call
        return y * box.scale             # the written attribute reads back: 2.0

    refcomp.reset()
    f = refcomp.compile(logged, backend="llvm")
    seen = []
    outs = [f(torch.full((3,), float(i)), seen) for i in range(4)]
    assert len(LOGGED) == len(seen) == 4 and STATE["last"] is LOGGED[-1]
    torch.testing.assert_close(outs[-1], LOGGED[-1] * 2)
    (entry,) = all_entries(f.cache)           # one graph, traced once, no break
    assert entry.reason is None and entry.hits == 3

    def after_item(x):
        v = x.sum().item()                       # the one break (RB002), as in Dynamo
        LOGGED.append(v)
        return x * 2

    report = refcomp.explain(after_item, torch.ones(3), backend="eager")
    assert (report.graph_count, report.graph_break_count) == (2, 1)
    assert [r["id"] for r in report.break_reasons] == ["RB002"] and LOGGED[-1] == 3.0


@as_module
def test_side_effects_2():
    """spec/runtime.md, "Side effects"."""
    import torch

    import refcomp
    from refcomp.resume import all_entries

    CALLS = 0

    def counted(x, seen):
        global CALLS
        y = x + 1
        CALLS += 1
        seen.append(y.sum())
        print("call", CALLS)
        return y * CALLS

    refcomp.reset()
    f = refcomp.compile(counted, backend="eager")
    seen = []
    for _ in range(10):
        f(torch.ones(2), seen)
    assert CALLS == 10 and len(seen) == 10
    torch.testing.assert_close(f(torch.ones(2), seen), torch.full((2,), 22.0))
    assert len(all_entries(f.cache)) <= 8    # no entry per value of CALLS

    class Layer:
        training = False

    layer, FLAG = Layer(), False

    def toggles(x):
        global FLAG
        FLAG = not FLAG                       # a global the frame assigns: RB008 at its read
        layer.training = not layer.training   # a bool attribute: guarded, store replayed
        return x + 1

    report = refcomp.explain(toggles, torch.ones(2), backend="eager")
    assert [(b["id"], b["instruction"]) for b in report.break_reasons] == [("RB008", "LOAD_GLOBAL FLAG")]
    assert "G['layer'].training == False" in report.guards and FLAG and layer.training

    COUNTS = {"n": 0}

    def dict_counter(x):
        COUNTS["n"] += 1                      # a dict item: guarded by value, store replayed
        return x + COUNTS["n"]

    refcomp.reset()
    g = refcomp.compile(dict_counter, backend="eager")
    for _ in range(3):
        g(torch.ones(2))
    assert COUNTS["n"] == 3 and refcomp.stats()["counters"]["recompiles"] == 2  # one per count


@as_module
def test_explain_and_fullgraph():
    """spec/runtime.md, "explain() and fullgraph"."""
    import torch

    import refcomp

    def uses_item(x):
        y = x.exp()
        m = y.mean().item()
        return y * m

    report = refcomp.explain(uses_item)(torch.ones(3))
    assert str(report).startswith("Graph Count: 2\nGraph Break Count: 1")
    (reason,) = report.break_reasons
    assert reason["id"] == "RB002" and reason["instruction"].startswith("CALL")
    try:
        refcomp.compile(uses_item, fullgraph=True, backend="eager")(torch.ones(3))
        raise AssertionError("fullgraph=True must raise")
    except refcomp.CaptureError as err:
        assert err.rid == "RB002" and reason["reason"] in str(err)

    def reads(t):
        return t.sum().item()

    def calls_reads(x):
        return reads(x * 2) + 1

    try:
        refcomp.compile(calls_reads, fullgraph=True, backend="eager")(torch.ones(3))
        raise AssertionError("fullgraph=True must raise")
    except refcomp.CaptureError as err:
        first, header, *stack = str(err).splitlines()
        assert first.startswith("[RB002]") and header.startswith("Traced call stack")
        assert [line.rsplit(" in ", 1)[1] for line in stack] == ["calls_reads", "reads"]
        assert f"line {reads.__code__.co_firstlineno + 1}, in reads" in stack[1]


@as_module
def test_training_steps():
    """spec/runtime.md, "Training steps"."""
    import torch

    import refcomp

    def train_step(model, opt, x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    refcomp.reset()
    step = refcomp.compile(train_step, backend="eager")
    losses = [step(model, opt, x, y).item() for _ in range(4)]
    assert losses[-1] < losses[0]
    counters = refcomp.stats()["counters"]
    assert counters["graphs"] >= 1 and counters.get("eager_calls", 0) == 0
    assert counters["misses"] == len([e for entries in refcomp.stats()["frames"].values()
                                      for e in entries])        # one miss per entry: no retrace


@as_module
def test_what_is_counted():
    """spec/runtime.md, "What is counted"."""
    import torch

    import refcomp

    @refcomp.disable                        # CPython runs it: a graph break (RB016)
    def log(*args, **kwargs):
        print(*args, **kwargs)

    def prints_first(x):
        log(end="")
        return x + 1

    refcomp.reset()
    report = refcomp.explain(prints_first, torch.ones(3))
    assert (report.graph_count, report.graph_break_count) == (1, 1)
    assert report.break_reasons[0]["instruction"].startswith("CALL")
    counters = refcomp.stats()["counters"]
    assert counters["graphs"] == 1 and counters["breaks"] == 1 and counters["misses"] == 2

    refcomp.reset()
    double = refcomp.compile(lambda x: x * 2, backend="eager", dynamic=False)
    double(torch.ones(3))
    with refcomp.set_stance("fail_on_recompile"):
        try:
            double(torch.ones(4))           # a miss of a frame with an entry: refused
        except refcomp.RecompileError:
            pass
    counters = refcomp.stats()["counters"]
    assert (counters["calls"], counters["misses"], counters["compiled_calls"]) == (2, 2, 1)
    assert counters.get("recompiles", 0) == 0

    refcomp.reset()                          # a graph that ends in a break is a graph
    report = refcomp.explain(lambda x: x * x.sum().item(), torch.ones(3))
    counters = refcomp.stats()["counters"]
    assert report.graph_count == counters["graphs"] == 2 and counters["breaks"] == 1


@as_module
def test_logs_and_debug_dumps():
    """spec/runtime.md, "Logs and debug dumps"."""
    import logging

    import torch

    import refcomp

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.name, record.getMessage()))

    keep = Keep()
    logging.getLogger("refcomp").addHandler(keep)
    refcomp.set_logs("graph_breaks,guards,recompiles")
    try:
        @refcomp.disable                   # CPython runs it: a graph break (RB016)
        def log(msg):
            print(msg)

        def f(x):
            y = x.cos()
            log("side effect")            # a graph break: RB016
            return y * 2

        cf = refcomp.compile(f, dynamic=False)
        cf(torch.randn(4))
        cf(torch.randn(5))                 # a miss: x's size changed
        cf(torch.randn(5))                 # a hit: nothing is logged
    finally:
        refcomp.set_logs("")
        logging.getLogger("refcomp").removeHandler(keep)

    breaks = [m for name, m in records if name == "refcomp.graph_breaks"]
    assert len(breaks) == 2 and "[RB016]" in breaks[0] and "(CALL)" in breaks[0]
    guards = [m for name, m in records if name == "refcomp.guards"]
    assert len(guards) == 4                # two entries of f, two of its resume function
    assert "TENSOR_MATCH: L['x']: Tensor torch.float32 on cpu, shape [4]" in guards[0]
    recompiles = [m for name, m in records if name == "refcomp.recompiles"]
    assert "entry 0 failed: L['x'].shape[0] == 4" in recompiles[0]
    try:
        refcomp.set_logs("guards,graphbreaks")
        raise AssertionError("an unknown channel must raise")
    except ValueError as err:
        assert "graph_breaks" in str(err) and "output_code" in str(err)


@as_module
def test_logs_and_debug_dumps_2():
    """spec/runtime.md, "Logs and debug dumps"."""
    import tempfile
    from pathlib import Path

    import torch

    import refcomp

    folder = Path(tempfile.mkdtemp())
    refcomp.set_logs("", debug_dir=str(folder))
    try:
        def g(x):
            return x.sin() + 1

        refcomp.compile(g, backend="llvm")(torch.randn(8))
    finally:
        refcomp.set_logs("")
    names = {p.name for p in folder.iterdir()}
    assert {"index.txt", "0001_g.code", "0001_g.guards", "0001_g.ir"} <= names
    assert names <= {"index.txt"} | {f"0001_g.{s}" for s in ("code", "guards", "ir", "ll", "opt.ll", "s")}
    ir = (folder / "0001_g.ir").read_text()
    assert ir.startswith("# after capture\nfunc @g(%x: f32[8])") and "# after dce" in ir
    assert "kernel(in0: f32[8], out0: f32[8])" in (folder / "0001_g.code").read_text()
