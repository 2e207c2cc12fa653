"""A property, a descriptor's __get__ or a __getattr__ runs exactly as often as in eager
(Note [Reads that run user code], refcomp/tracer/attributes.py): the read is traced as
the call it is, and no guard calls user code."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]
COUNT = {"n": 0}


class WithProperty:
    def __init__(self):
        self.k = 2.0

    @property
    def scale(self):
        COUNT["n"] += 1
        return self.k


class WithGetattr:
    def __getattr__(self, name):
        COUNT["n"] += 1
        return 3.0


class Descriptor:
    def __get__(self, obj, owner=None):
        COUNT["n"] += 1
        return 1.5


class WithDescriptor:
    d = Descriptor()


class ModuleWithProperty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.k = 2.0

    @property
    def scale(self):
        COUNT["n"] += 1
        return self.k

    def forward(self, x):
        return self.lin(x) * self.scale


prop, getattr_obj, desc = WithProperty(), WithGetattr(), WithDescriptor()


def read_property(x):
    return x * prop.scale


def read_getattr(x):
    return x * getattr_obj.anything


def read_descriptor(x):
    return x + desc.d


def _runs(fn, x, calls=3):
    """(result, how many times the counted code ran) per call."""
    out = []
    for _ in range(calls):
        before = COUNT["n"]
        result = fn(x)
        out.append((result, COUNT["n"] - before))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [read_property, read_getattr, read_descriptor],
                         ids=["property", "__getattr__", "descriptor"])
def test_code_run_by_a_read_runs_once_per_read(fn, backend):
    x = torch.randn(4)
    refcomp.reset()
    eager = _runs(fn, x)
    compiled = _runs(refcomp.compile(fn, backend=backend), x)
    for (want, n_want), (got, n_got) in zip(eager, compiled):
        torch.testing.assert_close(got, want)
        assert n_got == n_want == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_property_of_a_module_runs_once_per_call_and_sees_its_state(backend):
    torch.manual_seed(0)
    m = ModuleWithProperty()
    x = torch.randn(2, 4)
    refcomp.reset()
    cm = refcomp.compile(m, backend=backend)
    for k in (2.0, 2.0, 5.0):
        m.k = k
        before = COUNT["n"]
        got = cm(x)
        assert COUNT["n"] - before == 1
        torch.testing.assert_close(got, m.lin(x) * k)


class Aliased:
    """transformers' PretrainedConfig: a Python __getattribute__ mapping aliases."""

    attribute_map = {"hidden": "d"}

    def __init__(self):
        self.d = 3.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            COUNT["n"] += 1
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_python_getattribute_is_traced_and_never_called_by_guards(backend):
    cfg = Aliased()

    def f(x):
        return x * cfg.hidden + cfg.d

    x = torch.randn(3)
    refcomp.reset()
    report = refcomp.explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    cf = refcomp.compile(f, backend=backend)
    cf(x)  # the first call traces: its isinstance checks read cfg.__class__ (a known gap)
    for d in (3.0, 3.0, 4.0):
        cfg.d = d
        before = COUNT["n"]
        torch.testing.assert_close(cf(x), x * d + d)
        assert COUNT["n"] - before == 1  # eager's one aliased read


class Knobs:
    """hasattr(knobs, name) runs __getattr__ (missing names) or a property (corpus
    pyworld_hasattr_runs_getattr_twice)."""

    present = 1.0

    def __getattr__(self, name):
        COUNT["n"] += 1
        if name == "gone":
            raise AttributeError(name)
        return len(name)

    @property
    def broken(self):
        COUNT["n"] += 1
        raise AttributeError("broken")


knobs = Knobs()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["spare", "gone", "broken", "present"])
def test_hasattr_runs_the_lookup_once_per_call(backend, name):
    def f(x):
        return x * 2 if hasattr(knobs, name) else x - 1

    x = torch.randn(3)
    refcomp.reset()
    eager = _runs(f, x)
    compiled = _runs(refcomp.compile(f, backend=backend), x)
    assert [n for _, n in compiled] == [n for _, n in eager]
    for (want, _), (got, _) in zip(eager, compiled):
        torch.testing.assert_close(got, want)


class Doubled:
    """A data descriptor: `__set__` stores v, `__get__` reads it doubled (corpus
    pyworld_data_descriptor_set_then_get)."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        COUNT["n"] += 1
        return obj._k * 2

    def __set__(self, obj, v):
        COUNT["n"] += 1
        obj._k = v


class WithSetter:
    k = Doubled()

    def __init__(self):
        self._k = 1.0


class WithSetattr:
    def __setattr__(self, name, v):
        COUNT["n"] += 1
        object.__setattr__(self, name, v * 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("holder", [WithSetter, WithSetattr])
def test_a_store_that_runs_user_code_then_a_read_is_eagers(backend, holder):
    obj = holder()

    def f(x):
        obj.k = 0.25
        return x * obj.k

    x = torch.randn(3)
    refcomp.reset()
    eager = _runs(f, x)
    compiled = _runs(refcomp.compile(f, backend=backend), x)
    for (want, n_want), (got, n_got) in zip(eager, compiled):
        torch.testing.assert_close(got, want)
        assert n_got == n_want
