"""REFCOMP_LOGS channels, set_logs and the debug folder (spec/runtime.md, "Logs and debug
dumps"): each channel says what it promises for a small function and a graph break, and
nothing is logged when logging is off."""

import importlib
import logging

import pytest
import torch

import refcomp
from refcomp import logs
from tests.breaks import graph_break


@pytest.fixture(autouse=True)
def clean():
    refcomp.reset()
    yield
    refcomp.set_logs("")
    refcomp.reset()


def messages(caplog, channel):
    return [r.getMessage() for r in caplog.records if r.name == f"refcomp.{channel}"]


def sin_plus(x):
    return x.sin() + 1


def with_print(x):
    y = x.cos()
    graph_break("side effect")
    return y * 2


def test_unknown_channel_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        refcomp.set_logs("guards,graphbreaks")
    text = str(err.value)
    assert "graphbreaks" in text
    for name in logs.CHANNELS + ("all",):
        assert name in text
    assert logs.enabled() == frozenset()  # a bad call changes nothing


def test_nothing_is_logged_when_off(caplog, capsys):
    caplog.set_level(logging.DEBUG)
    f = refcomp.compile(with_print, dynamic=False, options={"cache_size_limit": 1})
    for n in (4, 5, 5):
        f(torch.randn(n))  # compile, graph break, recompile, limit hit
    assert [r for r in caplog.records if r.name.split(".")[-1] in logs.CHANNELS] == []
    assert "[refcomp." not in capsys.readouterr().err
    assert not logs._ON


def test_guards_lists_each_new_entry(caplog):
    refcomp.set_logs("guards")
    caplog.set_level(logging.INFO)
    f = refcomp.compile(sin_plus, backend="llvm", dynamic=False)
    x = torch.randn(4)
    torch.testing.assert_close(f(x), sin_plus(x))
    f(x)  # a hit: nothing new
    (text,) = messages(caplog, "guards")
    assert text.startswith("entry 0 of sin_plus (")
    assert "TENSOR_MATCH: L['x']: Tensor torch.float32 on cpu, shape [4]" in text
    assert "GRAD_MODE: torch.is_grad_enabled() == True" in text
    assert messages(caplog, "ir") == [] and messages(caplog, "output_code") == []


def test_graph_breaks_give_reason_location_and_instruction(caplog):
    refcomp.set_logs("graph_breaks")
    caplog.set_level(logging.INFO)
    f = refcomp.compile(with_print)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), with_print(x))
    (text,) = messages(caplog, "graph_breaks")
    line = with_print.__code__.co_firstlineno + 2  # the print
    assert text.startswith("graph break in with_print (")
    assert "[RB016]" in text and "function marked refcomp.disable" in text
    assert f"{__file__}:{line} (CALL)" in text


def test_fallback_frame_is_logged_as_eager(caplog):
    refcomp.set_logs("graph_breaks")
    caplog.set_level(logging.INFO)

    def generates(x):
        yield x + 1

    f = refcomp.compile(generates)
    assert list(f(torch.ones(2)))[0].tolist() == [2.0, 2.0]
    (text,) = messages(caplog, "graph_breaks")
    assert text.startswith("frame runs eagerly in generates") and "[RB014]" in text


def test_recompiles_name_failed_guards_and_limit_hits(caplog):
    refcomp.set_logs("recompiles")
    caplog.set_level(logging.INFO)
    f = refcomp.compile(sin_plus, dynamic=False, options={"cache_size_limit": 2})
    f(torch.randn(4))
    assert messages(caplog, "recompiles") == []  # a first compile is not a recompile
    f(torch.randn(5))
    first = messages(caplog, "recompiles")
    assert len(first) == 1
    assert "recompiling sin_plus (" in first[0]
    assert "entry 0 failed: L['x'].shape[0] == 4" in first[0]
    assert "cache_size_limit" not in first[0]
    with pytest.warns(RuntimeWarning, match="cache_size_limit"):
        f(torch.randn(6))
    last = messages(caplog, "recompiles")[-1]
    assert "entry 1 failed: L['x'].shape[0] == 5" in last
    assert "cache_size_limit=2 reached: this call runs eagerly" in last


def test_recompiles_at_a_resume_point(caplog):
    refcomp.set_logs("recompiles")
    caplog.set_level(logging.INFO)
    f = refcomp.compile(with_print, dynamic=False)
    f(torch.randn(4))
    f(torch.randn(5))
    texts = messages(caplog, "recompiles")
    assert any("resume function at line" in t and "L['y'].shape[0] == 4" in t
               for t in texts)


def test_ir_after_capture_and_after_each_pass(caplog):
    refcomp.set_logs("ir")
    caplog.set_level(logging.INFO)
    f = refcomp.compile(sin_plus, options={"passes": ["fold", "dce"]})
    f(torch.randn(4))
    texts = messages(caplog, "ir")
    assert [t.splitlines()[0].split(" (")[0] for t in texts] == [
        "# after capture", "# after fold", "# after dce"]
    # inputs are named by their source, not %a0
    assert "func @sin_plus(%x: f32[4])" in texts[0] and "sin %x" in texts[0]


def test_ir_after_a_pass_only_when_it_changed(caplog):
    def twice(x):
        y = x * 1.0          # simplify removes the multiply by one
        return (y + y).relu()

    refcomp.set_logs("ir")
    caplog.set_level(logging.INFO)
    refcomp.compile(twice, options={"passes": ["simplify", "dce", "cse"]})(torch.randn(4))
    capture, simplify, dce, cse = messages(caplog, "ir")
    assert " mul " in capture and " mul " not in dce  # simplify + dce drop the multiply
    assert "func @twice" in simplify and "func @twice" in dce
    assert cse.startswith("# after cse (") and cse.endswith("ms): unchanged")


def test_module_inputs_are_named_by_source(caplog):
    lin = torch.nn.Linear(3, 2)
    refcomp.set_logs("ir")
    caplog.set_level(logging.INFO)
    refcomp.compile(lin)(torch.randn(4, 3))
    first = messages(caplog, "ir")[0].splitlines()[1]
    assert "%self.weight: f32[2,3]" in first and "%self.bias: f32[2]" in first, first


def test_llvm_ir_and_asm_channels(caplog):
    def f(x):
        return torch.tanh(x) * 3.0625 + 0.8125   # constants unlikely to be cached

    refcomp.set_logs("llvm_ir,asm")
    caplog.set_level(logging.INFO)
    refcomp.compile(f, backend="llvm")(torch.randn(5, 3))
    before, after = messages(caplog, "llvm_ir")
    assert before.startswith("# LLVM IR before optimisation") and "define void" in before
    assert after.startswith("# LLVM IR after O3") and "define void" in after
    (asm,) = messages(caplog, "asm")
    assert asm.startswith("# assembly") and "k_" in asm and "ret" in asm


def test_a_failing_hook_never_changes_what_runs(caplog, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("planted failure inside logging")

    monkeypatch.setattr(logs, "_log", broken)
    refcomp.set_logs("all")
    caplog.set_level(logging.INFO)
    x = torch.randn(4)
    out = refcomp.compile(sin_plus)(x)
    torch.testing.assert_close(out, sin_plus(x))
    frame = refcomp.stats()["frames"]
    assert [e["compiled"] for entries in frame.values() for e in entries] == [True]
    assert any("planted failure" in r.getMessage() for r in caplog.records
               if r.name == "refcomp.logs")


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm", "triton"])
def test_logging_all_leaves_results_and_graph_counts_unchanged(backend, monkeypatch,
                                                               tmp_path, capsys):
    """REFCOMP_LOGS=all (and a debug folder) on every backend: same results, same graphs."""
    if backend == "triton":
        pytest.importorskip("triton")
        monkeypatch.setenv("TRITON_INTERPRET", "1")

    def model(x, w):
        y = torch.softmax(x @ w, dim=-1) * 2
        graph_break("break")              # one graph break
        return (y.sum(0) + 1).tanh()

    x, w = torch.randn(6, 4), torch.randn(4, 4)
    results = []
    for channels, folder in (("", None), ("all", str(tmp_path))):
        refcomp.reset()
        refcomp.set_logs(channels, folder)
        f = refcomp.compile(model, backend=backend)
        out = f(x, w)
        stats = refcomp.stats()
        results.append((out, stats["counters"]))
    (plain, counters0), (logged, counters1) = results
    torch.testing.assert_close(logged, plain)
    torch.testing.assert_close(logged, model(x, w))
    assert counters1 == counters0 and "fallbacks" not in counters0
    assert (tmp_path / "index.txt").read_text().count("graph") == 2


def test_output_code_llvm_kernels_and_eager(caplog):
    refcomp.set_logs("output_code")
    caplog.set_level(logging.INFO)
    refcomp.compile(sin_plus, backend="llvm")(torch.randn(4))
    (text,) = messages(caplog, "output_code")
    assert text.startswith("# kernel 0\nkernel(in0: f32[4], out0: f32[4])")
    assert "sin" in text and "# call\ndef call(x0):" in text
    refcomp.compile(sin_plus, backend="eager")(torch.randn(4))
    assert messages(caplog, "output_code")[-1].startswith("# output code: no generated code")


def test_output_code_triton_sources(caplog):
    # The Triton branch reads TritonGraph.sources; a stand-in keeps triton's import cost
    # out of this file (tests/codegen/test_triton_backend.py runs the real backend).
    class Compiled:
        sources = ["@triton.jit\ndef k_0(in0, out0): ..."]
        kernels = [object()]   # TritonGraph has kernels too (it once took the LLVM branch)

    def fn():
        pass

    fn.compiled = Compiled()
    refcomp.set_logs("output_code")
    caplog.set_level(logging.INFO)
    logs.output_code(fn)
    assert messages(caplog, "output_code") == [
        "# triton kernel 0\n@triton.jit\ndef k_0(in0, out0): ..."]


def test_all_goes_to_stderr(capsys):
    refcomp.set_logs("all")
    assert logs.enabled() == frozenset(logs.CHANNELS)
    refcomp.compile(with_print)(torch.randn(2))
    err = capsys.readouterr().err
    for channel in logs.CHANNELS:
        # no recompile here; code dumps appear only when a kernel is new to the process
        # (test_llvm_ir_and_asm_channels) and `triton` only on that backend
        if channel != "recompiles" and channel not in logs.DUMP_KINDS:
            assert f"[refcomp.{channel}] " in err
    refcomp.set_logs("")
    refcomp.compile(sin_plus)(torch.randn(2))
    assert "[refcomp." not in capsys.readouterr().err


def test_debug_dir_numbered_files(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    refcomp.set_logs("", debug_dir=str(tmp_path))
    f = refcomp.compile(sin_plus, backend="llvm", dynamic=False)
    f(torch.randn(4))
    f(torch.randn(5))
    names = sorted(p.name for p in tmp_path.iterdir())
    # per graph: IR, kernels, guards and the LLVM module before/after O3 and its assembly
    # (when the kernel is new to the process; the first one may come from the cache)
    kinds = ("code", "guards", "ir", "ll", "opt.ll", "s")
    assert set(names) - {"index.txt"} <= {f"000{i}_sin_plus.{s}" for i in (1, 2) for s in kinds}
    assert {f"000{i}_sin_plus.{s}" for i in (1, 2) for s in kinds[:3]} <= set(names)
    for i in (1, 2):  # LLVM dumps come together or not at all (a cached kernel: none)
        dumped = {f"000{i}_sin_plus.{s}" for s in kinds[3:]} & set(names)
        assert len(dumped) in (0, 3), dumped
    assert (tmp_path / "index.txt").read_text().splitlines()[1].startswith(
        "0002_sin_plus: graph 'sin_plus'")
    ir = (tmp_path / "0002_sin_plus.ir").read_text()
    assert ir.startswith("# after capture\nfunc @sin_plus(%x: f32[5])")
    assert "# after dce" in ir
    assert "kernel(in0: f32[5]" in (tmp_path / "0002_sin_plus.code").read_text()
    assert "shape [5]" in (tmp_path / "0002_sin_plus.guards").read_text()
    assert messages(caplog, "ir") == []  # the folder alone logs nothing
    refcomp.set_logs("", debug_dir=str(tmp_path))  # a new run continues the numbering
    refcomp.compile(sin_plus, backend="eager")(torch.randn(3))
    assert (tmp_path / "0003_sin_plus.ir").exists()


def test_environment_variables_at_import(tmp_path, monkeypatch, capsys):
    # Re-running the module body is what `import refcomp` does in a fresh process.
    monkeypatch.setenv("REFCOMP_LOGS", "guards")
    monkeypatch.setenv("REFCOMP_DEBUG_DIR", str(tmp_path))
    try:
        importlib.reload(logs)
        assert logs.enabled() == {"guards"}
        refcomp.compile(lambda x: x * 2, dynamic=False)(torch.ones(2))
        assert "[refcomp.guards] entry 0 of <lambda>" in capsys.readouterr().err
        suffixes = {p.name.split(".", 1)[1] for p in tmp_path.iterdir()}
        assert {"code", "guards", "ir"} <= suffixes <= {"code", "guards", "ir", "ll", "opt.ll",
                                                        "s", "txt"}
        monkeypatch.setenv("REFCOMP_LOGS", "guards,bogus")
        with pytest.raises(ValueError, match="unknown REFCOMP_LOGS channel"):
            importlib.reload(logs)
    finally:
        monkeypatch.delenv("REFCOMP_LOGS")
        monkeypatch.delenv("REFCOMP_DEBUG_DIR")
        importlib.reload(logs)
    assert not logs._ON
    assert [h for h in logging.getLogger("refcomp").handlers
            if h.get_name() == "refcomp.logs.stderr"] == []
