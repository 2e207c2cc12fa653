"""refcomp.compile of any callable torch.compile accepts, and such callables called
inside compiled code (spec/tracer.md, "Inlining"; issue 12 Deliver 8)."""

import functools

import pytest
import torch
import torch.nn.functional as F

import refcomp


def scale(x, s, bias=0.0):
    return x * s + bias


class Affine:
    def __init__(self, a):
        self.a = a

    def __call__(self, x):
        return x * self.a + 1

    def method(self, x):
        return x.sin() * self.a


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.reset()


CALLABLES = {
    "partial": lambda: functools.partial(scale, s=3.0),
    "partial_of_partial": lambda: functools.partial(functools.partial(scale, s=3.0), bias=1.0),
    "positional_partial": lambda: functools.partial(scale, bias=2.0),
    "callable_object": lambda: Affine(2.0),
    "bound_method": lambda: Affine(2.0).method,
    "c_function": lambda: F.gelu,
    "torch_builtin": lambda: torch.sin,
}


@pytest.mark.parametrize("name", sorted(CALLABLES))
@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_compile_accepts_the_callable(name, backend):
    c = CALLABLES[name]()
    x = torch.randn(5)
    args = (x, 0.5) if name == "positional_partial" else (x,)
    cf = refcomp.compile(c, backend=backend)
    for _ in range(3):
        torch.testing.assert_close(cf(*args), c(*args))
    report = refcomp.explain(c, *args, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    hits = [e["hits"] for entries in refcomp.stats()["frames"].values() for e in entries]
    assert sum(hits) >= 2  # traced once, then served from the cache


def test_a_changed_partial_or_object_recompiles_not_stale():
    box = {"p": functools.partial(scale, s=2.0), "obj": Affine(2.0)}

    def uses(x):
        return box["p"](x) + box["obj"](x)

    cf = refcomp.compile(uses, backend="eager")
    x = torch.ones(3)
    torch.testing.assert_close(cf(x), uses(x))
    box["p"] = functools.partial(scale, s=5.0)   # another partial: its keywords guarded
    torch.testing.assert_close(cf(x), uses(x))
    box["obj"].a = 7.0                           # the object's attribute: guarded
    torch.testing.assert_close(cf(x), uses(x))


def test_callables_called_inside_compiled_code_trace_into_one_graph():
    p, obj = functools.partial(scale, s=3.0), Affine(2.0)

    def inside(x):
        gelu = functools.partial(F.gelu, approximate="tanh")   # made inside the frame
        return p(x) + obj(x) + obj.method(x) + gelu(x)

    x = torch.randn(4)
    report = refcomp.explain(inside, x, backend="eager")
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    torch.testing.assert_close(report.result, inside(x))
    torch.testing.assert_close(refcomp.compile(inside, backend="llvm")(x), inside(x))


def test_shims_of_two_callables_do_not_share_a_cache():
    f, g = refcomp.compile(F.relu, backend="eager"), refcomp.compile(torch.sin, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(f(x), F.relu(x))
    torch.testing.assert_close(g(x), torch.sin(x))
    assert f.code is not g.code and f.cache is not g.cache


def test_compile_still_rejects_what_is_not_callable():
    with pytest.raises(TypeError, match="expects a function or nn.Module"):
        refcomp.compile(3)
