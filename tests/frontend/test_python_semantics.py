"""Python semantics inside and around compiled code, as CPython's (issue 32, point 2):
each class found by probing, on every backend."""

import copy
import functools
import io
import pickle
import sys
import types

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


class Plus(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Minus(torch.nn.Module):
    def forward(self, x):
        return x - 1


class TimesTenCall(torch.nn.Module):
    """A module whose class overrides __call__: `m(x)` runs the override."""

    def forward(self, x):
        return x + 1

    def __call__(self, x):
        return super().__call__(x) * 10


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_class_overriding_call_runs_the_override(backend):
    m, x = TimesTenCall(), torch.randn(4)
    torch.testing.assert_close(refcomp.compile(m, backend=backend)(x), (x + 1) * 10)
    inner = refcomp.compile(lambda v: m(v) - 1, backend=backend)
    torch.testing.assert_close(inner(x), (x + 1) * 10 - 1)
    assert refcomp.explain(lambda v: m(v) - 1, x).graph_break_count == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_swapping_the_class_or_its_forward_runs_the_new_forward(backend):
    x = torch.randn(4)
    m = Plus()
    cm = refcomp.compile(m, backend=backend)
    torch.testing.assert_close(cm(x), x + 1)
    m.__class__ = Minus
    torch.testing.assert_close(cm(x), x - 1)

    class Local(torch.nn.Module):
        def forward(self, x):
            return x * 2

    m2 = Local()
    cm2 = refcomp.compile(m2, backend=backend)
    torch.testing.assert_close(cm2(x), x * 2)
    Local.forward = lambda self, x: x * 5
    torch.testing.assert_close(cm2(x), x * 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_compiled_functions_own_defaults_are_read_per_call(backend):
    def f(x, k=2.0):
        return x * k

    def g(x, *, k=2.0):
        return x * k

    x = torch.randn(4)
    cf, cg = refcomp.compile(f, backend=backend), refcomp.compile(g, backend=backend)
    torch.testing.assert_close(cf(x), x * 2.0)
    torch.testing.assert_close(cg(x), x * 2.0)
    f.__defaults__ = (3.0,)
    g.__kwdefaults__["k"] = 4.0  # changed in place, as well as replaced
    torch.testing.assert_close(cf(x), x * 3.0)
    torch.testing.assert_close(cg(x), x * 4.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_getattr_with_a_default_on_a_tensor_sees_an_attribute_added_later(backend):
    t = torch.randn(4)

    def f(x):
        return x * getattr(t, "my_scale", 1.0)

    x = torch.randn(4)
    cf = refcomp.compile(f, backend=backend)
    torch.testing.assert_close(cf(x), x)
    t.my_scale = 5.0
    torch.testing.assert_close(cf(x), x * 5.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_imported_inside_the_function_is_guarded_like_a_global(backend):
    mod = types.ModuleType("refcomp_probe_cfg")
    mod.K = 2.0
    sys.modules["refcomp_probe_cfg"] = mod
    try:
        def f(x):
            import refcomp_probe_cfg
            return x * refcomp_probe_cfg.K

        def g(x):
            from refcomp_probe_cfg import K
            return x + K

        x = torch.randn(4)
        cf, cg = refcomp.compile(f, backend=backend), refcomp.compile(g, backend=backend)
        torch.testing.assert_close(cf(x), x * 2.0)
        torch.testing.assert_close(cg(x), x + 2.0)
        mod.K = 7.0
        torch.testing.assert_close(cf(x), x * 7.0)
        torch.testing.assert_close(cg(x), x + 7.0)
    finally:
        del sys.modules["refcomp_probe_cfg"]


@functools.singledispatch
def _double(a):
    return a * 2


@_double.register
def _(a: int):
    return a + 100


@pytest.mark.parametrize("backend", BACKENDS)
def test_calling_a_singledispatch_function_runs_as_in_eager(backend):
    # Found by probing: compiling the callee after the break copied singledispatch's
    # `dispatch` attribute over the compiled wrapper's own method (a TypeError).
    def f(x):
        return _double(x) + _double(3)

    x = torch.randn(4)
    torch.testing.assert_close(refcomp.compile(f, backend=backend)(x), f(x))


def _save_load(m):
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("how", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m)),
                                 _save_load], ids=["deepcopy", "pickle", "torch.save"])
def test_a_compiled_module_can_be_copied_pickled_and_saved(how):
    torch.manual_seed(0)
    m = Small()
    cm = refcomp.compile(m, backend="llvm")
    x = torch.randn(2, 4)
    cm(x)
    other = how(cm)
    assert isinstance(other, type(cm)) and other._orig_mod is not m
    torch.testing.assert_close(other(x), m(x))
    with torch.no_grad():
        other._orig_mod.lin.bias += 1  # a copy: the original is untouched
    torch.testing.assert_close(cm(x), m(x))


def test_compiling_a_torchscript_module_runs_it_with_a_reason():
    torch.manual_seed(0)
    scripted = torch.jit.script(Small())
    x = torch.randn(2, 4)
    torch.testing.assert_close(refcomp.compile(scripted)(x), scripted(x))
    report = refcomp.explain(scripted, x)
    assert [b["id"] for b in report.break_reasons] == ["RB004"]  # not silent
    assert "ScriptMethod" in report.break_reasons[0]["reason"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_large_int_after_automatic_dynamic_runs_as_in_eager(backend):
    # On interp, a size symbol's carrier tensor [n, 0] for n = 2**62 has no numpy array:
    # such a value stays static (a recompile), below the limit it is the symbol.
    def f(x, n):
        return x * 2 + n

    x = torch.randn(4)
    cf = refcomp.compile(f, backend=backend)
    for n in (3, 4, 5, 2**40, 2**62):
        torch.testing.assert_close(cf(x, n), f(x, n))


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_inside_a_frame_whose_input_requires_grad(backend):
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y + 1, torch.is_inference_mode_enabled()

    x = torch.randn(4, requires_grad=True)
    got, want = refcomp.compile(f, backend=backend)(x), f(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] and got[0].requires_grad == want[0].requires_grad


def test_two_modules_made_from_one_source_keep_their_own_globals():
    # Found by the Python-level fuzzer (tests/fuzz/pycorpus.py, `equal_code_objects`):
    # equal code objects shared one frame cache, and the resume function of the first
    # module's break, built with its globals, ran the second module's frame.
    source = ("CALLS = 0\n"
              "def f(x):\n"
              "    global CALLS\n"
              "    CALLS += 1\n"
              "    return x + x\n")
    first, second = {}, {}
    exec(compile(source, "<first>", "exec"), first)
    exec(compile(source, "<second>", "exec"), second)
    x = torch.randn(4)
    refcomp.compile(first["f"])(x)
    refcomp.compile(second["f"])(x)
    assert (first["CALLS"], second["CALLS"]) == (1, 1)


LEAF_FACTORIES = {
    "ones": lambda x: (torch.ones(3, requires_grad=True) * x,),
    "tensor": lambda x: (torch.tensor([1.0, 2.0, 3.0], requires_grad=True) * x,),
    "zeros_like": lambda x: (torch.zeros_like(x, requires_grad=True) + x,),
    "parameter": lambda x: (torch.nn.Parameter(torch.ones(3)) * x,),
    "requires_grad_": lambda x: (x.clone().requires_grad_() * 2,),
    "returned_leaf": lambda x: (torch.ones(3, requires_grad=True), x * 2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LEAF_FACTORIES))
def test_a_leaf_that_requires_grad_made_in_the_frame_is_eagers(name, backend):
    # Found probing issue 33's leaf in-place bug (Nov 29): every backend returned
    # `torch.ones(3, requires_grad=True)` (and what was computed from it) without
    # requires_grad, so `u.relu_()` on it ran where eager raises.  Such a leaf is made at a
    # break now (RB004), eagerly.
    fn = LEAF_FACTORIES[name]
    x = torch.randn(3)
    got, want = refcomp.compile(fn, backend=backend)(x), fn(x)
    for g, w in zip(got, want):
        assert (g.requires_grad, g.is_leaf) == (w.requires_grad, w.is_leaf)
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_on_a_leaf_made_in_the_frame_raises_as_eager(backend):
    def f(x):
        u = torch.ones(3, requires_grad=True)
        u.relu_()
        return u * x

    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        f(torch.randn(3))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        refcomp.compile(f, backend=backend)(torch.randn(3))
