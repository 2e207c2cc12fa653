"""Forward pre-hooks and forward hooks are traced (Note [Forward hooks traced],
refcomp/tracer/modules.py): on a submodule and on the compiled module itself, where they
made the whole call run eagerly with 0 graphs and no reason.  Backward and global hooks
break with a reason id."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_forward_hooks_are_traced_in_one_graph(backend):
    log = []
    m = _model()
    m[0].register_forward_hook(lambda mod, inp, out: log.append(out.shape[1]) or out * 2)
    m[2].register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    x = torch.randn(3, 4)
    want = m(x) - 1
    assert log == [4]

    def f(x):
        return m(x) - 1

    got = refcomp.compile(f, backend=backend)(x)
    torch.testing.assert_close(got, want)
    assert log == [4, 4]  # the hook's side effect, replayed once
    report = refcomp.explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_on_the_compiled_module_itself_are_traced(backend):
    m = torch.nn.Linear(4, 4)
    m.register_forward_hook(lambda mod, inp, out: out.relu())
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs),
                                with_kwargs=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(refcomp.compile(m, backend=backend)(x), m(x))
    report = refcomp.explain(m, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)


def test_a_hook_added_or_removed_after_compiling_recompiles():
    m = torch.nn.Linear(4, 4)
    cm = refcomp.compile(m)
    x = torch.randn(3, 4)
    torch.testing.assert_close(cm(x), m(x))
    handle = m.register_forward_hook(lambda mod, inp, out: out * 3)
    torch.testing.assert_close(cm(x), m(x))
    handle.remove()
    torch.testing.assert_close(cm(x), m(x))


def test_a_backward_hook_breaks_with_a_reason_instead_of_running_silently():
    m = torch.nn.Linear(4, 4)
    m.register_full_backward_hook(lambda mod, grad_in, grad_out: None)
    x = torch.randn(3, 4)
    torch.testing.assert_close(refcomp.compile(m)(x), m(x))
    report = refcomp.explain(m, x)
    assert [b["id"] for b in report.break_reasons] == ["RB004"]
    assert "backward or global hooks" in report.break_reasons[0]["reason"]
