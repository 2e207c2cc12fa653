"""Side effects inside compiled frames happen exactly as in eager (spec/runtime.md).

Printing, logging, globals, attributes and caller-visible lists: once per call, in
program order, never lost, never repeated, and without a recompile per call.
"""

import logging

import pytest
import torch
import torch.nn as nn

import refcomp
from refcomp.resume import all_entries

BACKENDS = ["eager", "interp"]
COUNTER = 0
LOG = logging.getLogger("refcomp.test_side_effects")


def prints_between_ops(x):
    print("start", tuple(x.shape))
    y = x.relu()
    print("middle", y.dtype)
    z = y * 2
    print("end")
    return z


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_runs_once_per_call_in_order(backend, capsys):
    cf = refcomp.compile(prints_between_ops, backend=backend)
    x = torch.randn(2, 3)
    for _ in range(3):
        torch.testing.assert_close(cf(x), prints_between_ops(x))
    out = capsys.readouterr().out.splitlines()
    once = ["start (2, 3)", "middle torch.float32", "end"]
    assert out == once * 6  # 3 compiled calls, 3 eager calls, interleaved
    report = refcomp.explain(prints_between_ops, x, backend=backend)
    # Replayed after the one graph, in order (Note [Replayed side effects]).
    assert report.graph_break_count == 0 and report.graph_count == 1


def logs_inside_forward(x):
    y = x.sin()
    LOG.warning("mean is computed after this")
    return y.mean()


def test_logging_runs_once_per_call(caplog):
    cf = refcomp.compile(logs_inside_forward, backend="eager")
    x = torch.randn(4)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        for _ in range(4):
            torch.testing.assert_close(cf(x), logs_inside_forward(x))
    assert [r.getMessage() for r in caplog.records] == ["mean is computed after this"] * 8
    report = refcomp.explain(logs_inside_forward, x, backend="eager")
    assert report.graph_count == 1 and report.graph_break_count == 0


def counts_calls(x):
    global COUNTER
    y = x + 1
    COUNTER += 1
    return y * COUNTER


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_counter_counts_every_call_without_recompiling(backend):
    global COUNTER
    refcomp.reset()
    cf = refcomp.compile(counts_calls, backend=backend)
    x = torch.randn(3)
    COUNTER = 0
    got = [cf(x) for _ in range(10)]
    assert COUNTER == 10
    COUNTER = 0
    want = [counts_calls(x) for _ in range(10)]
    assert COUNTER == 10
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    es = all_entries(cf.cache)
    assert len(es) <= 2  # the frame's entry and one resume point: no recompile per count


def appends_to_argument(x, out):
    y = x * 2
    out.append(y)
    out.append(y.sum())
    return y + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_list_passed_in_ends_up_as_in_eager(backend):
    cf = refcomp.compile(appends_to_argument, backend=backend)
    x = torch.randn(2, 2)
    got_list, want_list = [], []
    for _ in range(3):
        torch.testing.assert_close(cf(x, got_list), appends_to_argument(x, want_list))
    assert len(got_list) == len(want_list) == 6
    for g, w in zip(got_list, want_list):
        torch.testing.assert_close(g, w)


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0
        self.last_norm = None

    def forward(self, x):
        self.calls += 1
        y = self.fc(x)
        self.last_norm = y.norm().item()
        return y.relu()


def test_attributes_of_a_module_are_updated_once_per_call():
    torch.manual_seed(0)
    model = Counting()
    twin = Counting()
    twin.load_state_dict(model.state_dict())
    cm = refcomp.compile(model, backend="eager")
    for _ in range(5):
        x = torch.randn(2, 4)
        torch.testing.assert_close(cm(x), twin(x))
        assert model.last_norm == pytest.approx(twin.last_norm)
    assert model.calls == twin.calls == 5
    es = all_entries(cm._compiled_forward.cache)
    assert [e.hits for e in es] == [4] * len(es)  # traced on call 1, reused by calls 2-5
    assert [e.reason.rid for e in es if e.reason] == ["RB008", "RB002"]  # norm() is captured


def mutates_dict_argument(x, stats):
    stats["sum"] = x.sum()
    del stats["old"]
    return x - 1


def test_a_dict_passed_in_is_mutated_in_order():
    x = torch.randn(3)
    got, want = {"old": 1}, {"old": 1}
    cf = refcomp.compile(mutates_dict_argument, backend="eager")
    torch.testing.assert_close(cf(x, got), mutates_dict_argument(x, want))
    assert list(got) == list(want) == ["sum"]
    torch.testing.assert_close(got["sum"], want["sum"])
