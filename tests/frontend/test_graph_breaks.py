"""Graph breaks with resume (spec/runtime.md): split, resume, reuse, fall back safely."""

import pytest
import torch

import refcomp
from refcomp import resume
from refcomp.resume import all_entries
from tests.breaks import graph_break

BACKENDS = ["eager", "interp"]


def entries(cf):
    return all_entries(cf.cache)


def loop_with_item(x):
    total = 0.0
    for i in range(100):
        x = x * 0.5 + 1
        total += x.mean().item()
    return x, total


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_inside_a_loop_reuses_one_resume_entry(backend):
    refcomp.reset()
    cf = refcomp.compile(loop_with_item, backend=backend, options={})
    for _ in range(2):
        x = torch.randn(3, 4)
        got, want = cf(x), loop_with_item(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == pytest.approx(want[1], rel=1e-5)
    es = entries(cf)
    assert len(es) <= 3, [e.notes for e in es]  # no entry per iteration
    assert max(e.hits for e in es) >= 2 * 99 - 2  # one resume entry serves each iteration
    # .item() breaks; the loop's exit returns `total`, a number that changes (RB020).
    assert {e.reason.rid for e in es if e.reason} <= {"RB002", "RB020"}


def while_on_tensor(x):
    while x.sum() > 0:
        x = x - 1
    return x * 2


def if_on_tensor(x):
    y = x.sin()
    if y.sum() > 0:
        z = y + 1
    else:
        z = y - 1
    return z * 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [while_on_tensor, if_on_tensor])
def test_jump_on_a_tensor_takes_the_branch_eager_takes(f, backend):
    cf = refcomp.compile(f, backend=backend)
    for sign in (1, -1, 1, -1):
        x = torch.rand(5) * 3 * sign
        torch.testing.assert_close(cf(x), f(x))
    report = refcomp.explain(f, torch.rand(5) * 3, backend=backend)
    assert report.graph_count >= 2 and report.graph_break_count >= 1
    assert {r["id"] for r in report.break_reasons} == {"RB003"}
    assert all(r["instruction"].startswith("POP_JUMP") for r in report.break_reasons)


def unsupported_call(x):
    y = x.exp()
    n = torch.equal(y, y)  # no meta kernel, so not an opaque node: called concretely
    return y + n


def int_of_tensor(x):
    k = int(x.sum())
    return x + k


def tolist_then_tensor(x):
    vals = x.tolist()
    return x * len(vals)


@pytest.mark.parametrize("f,rid", [(unsupported_call, "RB004"), (int_of_tensor, "RB002"),
                                   (tolist_then_tensor, "RB002")])
def test_breaking_calls_run_once_concretely_and_equal_eager(f, rid):
    x = torch.randn(6)
    report = refcomp.explain(f, x, backend="eager")
    assert [r["id"] for r in report.break_reasons] == [rid], str(report)
    assert report.break_reasons[0]["instruction"].startswith("CALL")
    torch.testing.assert_close(report.result, f(x))


def helper_that_prints(t):
    graph_break("inside helper", tuple(t.shape))
    return t * 2


def calls_printing_helper(x):
    y = x + 1
    z = helper_that_prints(y)
    return z - 1


def test_break_inside_an_inlined_callee_compiles_the_callee_as_its_own_frame(capsys):
    x = torch.randn(2, 3)
    report = refcomp.explain(calls_printing_helper, x, backend="eager")
    torch.testing.assert_close(report.result, calls_printing_helper(x))
    assert capsys.readouterr().out == "inside helper (2, 3)\n" * 2
    # Graphs: x + 1 | (callee) t * 2 | z - 1.  The print stops the caller (at its call
    # into the helper) and the helper (at the print), for the same reason at the same
    # line: explain lists that break once (issue 12, "each break listed once").
    assert report.graph_count == 3 and report.graph_break_count == 1
    assert [r["id"] for r in report.break_reasons] == ["RB016"]
    assert report.break_reasons[0]["where"].endswith(
        f":{helper_that_prints.__code__.co_firstlineno + 1}")
    cf = refcomp.compile(calls_printing_helper, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(cf(x), calls_printing_helper(x))
    (callee,) = resume.callee_functions(cf.cache).values()
    assert callee.fn is helper_that_prints and callee.cache.entries[0].hits >= 2


class Tag:
    def __enter__(self):
        graph_break("enter")

    def __exit__(self, *exc):
        graph_break("exit")


def break_inside_other_with(x):
    with Tag():
        y = x * 2
        graph_break("in block")
    return y


def test_a_user_context_manager_around_a_break_enters_and_exits_once(capsys):
    x = torch.randn(3)
    report = refcomp.explain(break_inside_other_with, x, backend="eager")
    assert report.graph_count == 1  # x * 2, inside the block, in a resume function
    # Tag() is made in the frame (spec/tracer.md, "Objects made in the frame"); the
    # `with` on it breaks, and the block runs natively with the object rebuilt.
    assert report.break_reasons[0]["id"] == "RB013"
    assert "`with` on a Tag made in the frame" in report.break_reasons[0]["reason"]
    torch.testing.assert_close(report.result, x * 2)
    assert capsys.readouterr().out == "enter\nin block\nexit\n"
    cf = refcomp.compile(break_inside_other_with, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(cf(x), x * 2)
    assert capsys.readouterr().out == "enter\nin block\nexit\n" * 3


def break_inside_no_grad(x, w):
    h = x * w
    with torch.no_grad():
        y = h * 2
        graph_break("inside no_grad", y.requires_grad)
        k = y.sum().item()
    return h * k, y


@pytest.mark.parametrize("backend", BACKENDS)
def test_breaks_inside_no_grad_resume_in_the_right_grad_mode(backend, capsys):
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    cf = refcomp.compile(break_inside_no_grad, backend=backend)
    for _ in range(2):
        got, want = cf(x, w), break_inside_no_grad(x, w)
        assert torch.is_grad_enabled()
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
            assert g.requires_grad == e.requires_grad
    assert capsys.readouterr().out == "inside no_grad False\n" * 4
    (gw,) = torch.autograd.grad(got[0].sum(), w)
    (ew,) = torch.autograd.grad(want[0].sum(), w)
    torch.testing.assert_close(gw, ew)
    report = refcomp.explain(break_inside_no_grad, x, w, backend=backend)
    assert [r["id"] for r in report.break_reasons] == ["RB016", "RB002"]


def raises_inside_no_grad(x):
    with torch.no_grad():
        graph_break("about to fail")
        raise ValueError("boom")


def test_an_exception_inside_no_grad_restores_the_grad_mode(capsys):
    cf = refcomp.compile(raises_inside_no_grad, backend="eager")
    with pytest.raises(ValueError, match="boom"):
        cf(torch.randn(2))
    assert torch.is_grad_enabled()


def view_then_break(x):
    v = x[0]
    graph_break("break")
    v.add_(1)
    return x


def test_a_view_of_an_input_alive_at_a_break_is_rebuilt_as_a_view(capsys):
    # It once kept the frame eager; now the view crosses the break as a view of the
    # caller's tensor (spec/runtime.md), so the in-place add after it shows in x.
    x1, x2 = torch.zeros(2, 3), torch.zeros(2, 3)
    cf = refcomp.compile(view_then_break, backend="eager")
    torch.testing.assert_close(cf(x1), view_then_break(x2))
    torch.testing.assert_close(x1, x2)
    torch.testing.assert_close(cf(x1), view_then_break(x2))  # the cached entry
    torch.testing.assert_close(x1, x2)
    (entry,) = cf.cache.entries
    assert entry.resume is not None and entry.reason.rid == "RB016"


def test_fullgraph_raises_on_the_first_break_with_its_reason():
    with pytest.raises(refcomp.CaptureError, match="RB002") as info:
        refcomp.compile(loop_with_item, backend="eager", fullgraph=True)(torch.randn(2))
    assert info.value.rid == "RB002"
    report = refcomp.explain(loop_with_item, torch.randn(2), backend="eager")
    assert report.break_reasons[0]["reason"] in str(info.value)


def test_a_changed_fact_at_a_resume_point_recompiles_only_that_point():
    refcomp.reset()
    cf = refcomp.compile(if_on_tensor, backend="eager")
    for dtype in (torch.float32, torch.float64, torch.float32):
        x = torch.rand(4, dtype=dtype) + 0.5
        torch.testing.assert_close(cf(x), if_on_tensor(x))
    frame_entries = cf.cache.entries
    assert len(frame_entries) == 2  # one per dtype
    assert len(entries(cf)) == 4  # and one resume entry per dtype on the taken branch


def shared_local_list(x):
    a = [x + 1]
    b = a
    graph_break("break")
    b.append(x * 2)
    return a


def test_one_list_under_two_names_stays_one_list_after_a_break(capsys):
    x = torch.randn(3)
    got = refcomp.compile(shared_local_list, backend="eager")(x)
    want = shared_local_list(x)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        graph_break("noisy", y.shape[0])
        return y.relu()


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Noisy()
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.inner(x * 2))


def test_a_submodule_that_breaks_is_compiled_as_its_own_frame(capsys):
    torch.manual_seed(0)
    model = Outer()
    cm = refcomp.compile(model, backend="eager")
    for _ in range(3):
        x = torch.randn(3, 4)
        torch.testing.assert_close(cm(x), model(x))
    assert capsys.readouterr().out == "noisy 3\n" * 6
    (callee,) = resume.callee_functions(cm._compiled_forward.cache).values()
    assert callee.fn is Noisy.forward
    report = refcomp.explain(model, torch.randn(3, 4))
    assert report.graph_count == 4  # x * 2 | fc | relu | out
    assert report.graph_break_count == 1  # the print, which stops Outer and Noisy: listed once


def prints_batch(x):
    y = x * 2
    graph_break("batch", y.shape[0])  # a symbolic size, rebuilt from this call's shapes
    return y.sum(1) + 1


def test_symbolic_sizes_cross_a_break_with_dynamic_shapes(capsys):
    refcomp.reset()
    cf = refcomp.compile(prints_batch, backend="eager", dynamic=True)
    for n in (2, 3, 5):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x), prints_batch(x))
    assert capsys.readouterr().out == "".join(f"batch {n}\n" * 2 for n in (2, 3, 5))
    es = entries(cf)
    assert len(es) == 2 and all(e.graph is not None for e in es)  # one entry per segment
