"""Regression tests for issue 14: ordinary state changes that used to return stale results.

Each test compiles a program, changes one piece of Python or torch state between
calls, and checks that every call equals eager (a recompile or a hit are both fine).
"""

import enum
import math
import warnings

import pytest
import torch
import torch.nn as nn

import refcomp


@pytest.fixture(autouse=True)
def _fresh():
    refcomp.reset()
    yield
    refcomp.reset()


def same(got, want):
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    else:
        assert got == want or (got != got and want != want)


# --- module containers --------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["ModuleList", "Sequential", "ModuleDict"])
def test_appending_to_a_module_container(kind):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            if kind == "ModuleDict":
                self.layers = nn.ModuleDict({"a": nn.Linear(3, 3)})
            elif kind == "Sequential":
                self.layers = nn.Sequential(nn.Linear(3, 3))
            else:
                self.layers = nn.ModuleList([nn.Linear(3, 3)])

        def forward(self, x):
            if kind == "ModuleDict":
                for name in self.layers:
                    x = self.layers[name](x)
                return x
            if kind == "Sequential":
                return self.layers(x)
            for layer in self.layers:
                x = layer(x)
            return x

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(2, 3)
    same(cm(x), m(x))
    if kind == "ModuleDict":
        m.layers["b"] = nn.Linear(3, 3)
    else:
        m.layers.append(nn.Linear(3, 3))
    same(cm(x), m(x))


def test_len_of_a_module_list():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.ReLU()])

        def forward(self, x):
            return x * len(self.layers) + self.layers[-1](x)

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(4)
    same(cm(x), m(x))
    m.layers.append(nn.Sigmoid())
    same(cm(x), m(x))


# --- identity: enums and sentinels --------------------------------------------------------
class Mode(enum.Enum):
    ADD = 1
    MUL = 2


MODE = Mode.ADD
_SENTINEL = object()
OPTION = _SENTINEL


@pytest.mark.parametrize("op", ["is", "=="])
def test_enum_member_compared(op):
    def f(x):
        if (MODE is Mode.ADD) if op == "is" else (MODE == Mode.ADD):
            return x + 1
        return x * 3

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    global MODE
    try:
        same(cf(x), f(x))
        MODE = Mode.MUL
        same(cf(x), f(x))
    finally:
        MODE = Mode.ADD


def test_enum_argument_compared():
    def f(x, mode):
        return x + 1 if mode is Mode.ADD else x * 3

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    same(cf(x, Mode.ADD), f(x, Mode.ADD))
    same(cf(x, Mode.MUL), f(x, Mode.MUL))


def test_sentinel_compared_with_is():
    def f(x):
        if OPTION is _SENTINEL:
            return x - 1
        return x + 10

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    global OPTION
    try:
        same(cf(x), f(x))
        OPTION = object()
        same(cf(x), f(x))
    finally:
        OPTION = _SENTINEL


def test_sentinel_argument_compared_with_is():
    def f(x, opt=_SENTINEL):
        return x - 1 if opt is _SENTINEL else x + 10

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    same(cf(x, _SENTINEL), f(x, _SENTINEL))
    same(cf(x, object()), f(x, object()))


# --- absence of attributes ----------------------------------------------------------------
@pytest.mark.parametrize("probe", ["getattr", "hasattr"])
def test_attribute_that_appears_later(probe):
    class M(nn.Module):
        def forward(self, x):
            if probe == "getattr":
                return x * getattr(self, "gain", 1.0)
            return x * 5 if hasattr(self, "gain") else x

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(4)
    same(cm(x), m(x))
    m.gain = 3.0
    same(cm(x), m(x))
    del m.gain
    same(cm(x), m(x))


def test_attribute_of_a_plain_object_that_appears_later():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x + getattr(cfg, "bias", 0.0)

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    same(cf(x), f(x))
    cfg.bias = 2.0
    same(cf(x), f(x))


# --- membership ---------------------------------------------------------------------------
ENABLED = {"relu"}
TABLE = {"relu": 1}


@pytest.mark.parametrize("container", ["set", "dict"])
def test_membership_in_a_global_that_changes(container):
    def f(x):
        if "gelu" in (ENABLED if container == "set" else TABLE):
            return torch.nn.functional.gelu(x)
        return torch.relu(x)

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(6)
    try:
        same(cf(x), f(x))
        ENABLED.add("gelu")
        TABLE["gelu"] = 2
        same(cf(x), f(x))
        ENABLED.discard("gelu")
        TABLE.pop("gelu")
        same(cf(x), f(x))
    finally:
        ENABLED.discard("gelu")
        TABLE.pop("gelu", None)


# --- hyperparameters read by module handlers ----------------------------------------------
@pytest.mark.parametrize("make, attr, new", [
    (lambda: nn.Softmax(dim=0), "dim", 1),
    (lambda: nn.LogSoftmax(dim=0), "dim", 1),
    (lambda: nn.LeakyReLU(0.01), "negative_slope", 0.5),
    (lambda: nn.GELU(), "approximate", "tanh"),
    (lambda: nn.LayerNorm(4), "eps", 10.0),
    (lambda: nn.Flatten(), "start_dim", 0),
    (lambda: nn.MaxPool2d(2), "stride", 1),
    (lambda: nn.AvgPool2d(2), "padding", 1),
    (lambda: nn.Conv2d(2, 2, 3), "padding", (1, 1)),
    (lambda: nn.Dropout(0.5), "p", 0.0),
])
def test_module_hyperparameter_changed(make, attr, new):
    m = make()
    if isinstance(m, nn.Dropout):
        m.p = 0.0
        new = 0.0
    m.eval()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(2, 2, 4, 4) if isinstance(m, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d)) \
        else torch.randn(3, 4)
    with torch.no_grad():
        same(cm(x), m(x))
        setattr(m, attr, new)
        same(cm(x), m(x))


def test_module_hyperparameter_inside_user_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.LeakyReLU(0.01)

        def forward(self, x):
            return self.act(x) * 2

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(8)
    same(cm(x), m(x))
    m.act.negative_slope = 0.9
    same(cm(x), m(x))


# --- instance-level forward override ------------------------------------------------------
def test_instance_forward_override_of_a_submodule():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x)

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(2, 3)
    same(cm(x), m(x))
    m.lin.forward = lambda inp: inp * 7
    same(cm(x), m(x))


def test_instance_forward_override_of_the_compiled_module():
    class M(nn.Module):
        def forward(self, x):
            return x + 1

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(3)
    same(cm(x), m(x))
    m.forward = lambda inp: inp * 7
    same(cm(x), m(x))


# --- function defaults and code -----------------------------------------------------------
def helper(x, scale=2.0, *, shift=0.0):
    return x * scale + shift


def test_mutated_defaults_of_a_called_function():
    def f(x):
        return helper(x)

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    old, oldkw = helper.__defaults__, helper.__kwdefaults__
    try:
        same(cf(x), f(x))
        helper.__defaults__ = (5.0,)
        same(cf(x), f(x))
        helper.__kwdefaults__ = {"shift": 1.0}
        same(cf(x), f(x))
    finally:
        helper.__defaults__, helper.__kwdefaults__ = old, oldkw


def test_mutated_code_of_a_called_function():
    def g(x):
        return x + 1

    def h(x):
        return x * 100

    def f(x):
        return g(x)

    old = g.__code__
    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    try:
        same(cf(x), f(x))
        g.__code__ = h.__code__
        same(cf(x), f(x))
    finally:
        g.__code__ = old


def test_mutated_defaults_of_a_module_method():
    class M(nn.Module):
        def scale(self, x, k=2.0):
            return x * k

        def forward(self, x):
            return self.scale(x)

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(4)
    same(cm(x), m(x))
    M.scale.__defaults__ = (9.0,)
    same(cm(x), m(x))


# --- floats: sign and NaN -----------------------------------------------------------------
def test_negative_zero_float_argument():
    def f(x, d):
        return x / d

    cf = refcomp.compile(f, backend="eager")
    x = torch.ones(3)
    same(cf(x, 0.0), f(x, 0.0))
    same(cf(x, -0.0), f(x, -0.0))
    assert (cf(x, -0.0) < 0).all()


def test_nan_float_argument_hits_and_changes():
    def f(x, v):
        return x + v

    cf = refcomp.compile(f, backend="eager")
    x = torch.ones(3)
    same(cf(x, math.nan), f(x, math.nan))
    same(cf(x, math.nan), f(x, math.nan))
    same(cf(x, 1.0), f(x, 1.0))
    assert cf.cache.entries[0].hits == 1  # NaN == NaN as a guard: the second call hits


# --- global torch state -------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["eager", "interp", "llvm"])
def test_autocast_dtype_matches_eager(backend):
    def f(x, w):
        return torch.relu(x @ w) + 1

    cf = refcomp.compile(f, backend=backend)
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    same(cf(x, w), f(x, w))
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cpu", dtype=dtype):
            got, want = cf(x, w), f(x, w)
        assert got.dtype == want.dtype == dtype
        same(got, want)
    same(cf(x, w), f(x, w))  # and back to float32


def test_autocast_entered_before_the_first_call():
    def f(x, w):
        return x @ w

    cf = refcomp.compile(f, backend="llvm")
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = cf(x, w), f(x, w)
    same(got, want)
    same(cf(x, w), f(x, w))


def test_torch_function_mode_is_not_ignored():
    from torch.overrides import TorchFunctionMode

    class Double(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.Tensor.add or func is torch.add:
                return out * 2
            return out

    def f(x):
        return torch.add(x, 1)

    cf = refcomp.compile(f, backend="interp")
    x = torch.randn(4)
    same(cf(x), f(x))
    with Double():
        same(cf(x), f(x))
    same(cf(x), f(x))


def test_torch_function_mode_active_at_first_call():
    from torch.overrides import TorchFunctionMode

    seen = []

    class Log(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    def f(x):
        return torch.sin(x) + 1

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(4)
    with Log():
        same(cf(x), f(x))
    assert seen.count(torch.sin) == 2  # the compiled call went through the mode too
    same(cf(x), f(x))


def test_default_device_and_deterministic_flag_are_guarded():
    def f(x):
        return x + torch.ones(3)

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(3)
    same(cf(x), f(x))
    old = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        same(cf(x), f(x))
    finally:
        torch.use_deterministic_algorithms(old)
    n = len(cf.cache.entries)
    assert n == 2, "the deterministic flag changed: a recompile"
    with torch.device("meta"):
        got = cf(torch.randn(3, device="cpu").to("meta"))
    assert got.device.type == "meta"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same(cf(x), f(x))


def test_method_replaced_on_the_class():
    class M(nn.Module):
        def scale(self, x):
            return x * 2

        def forward(self, x):
            return self.scale(x)

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(4)
    same(cm(x), m(x))
    M.scale = lambda self, inp: inp * 11
    same(cm(x), m(x))

    class Inner(nn.Module):
        def forward(self, x):
            return x + 1

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x)

    o = Outer()
    co = refcomp.compile(o, backend="eager")
    same(co(x), o(x))
    Inner.forward = lambda self, inp: inp - 5
    same(co(x), o(x))


def test_object_with_len_and_membership():
    class Bag:
        def __init__(self):
            self.items = ["a"]

        def __len__(self):
            return len(self.items)

        def __contains__(self, k):
            return k in self.items

    bag = Bag()

    def f(x):
        y = x * len(bag)
        if "b" in bag:
            y = y + 100
        if bag:
            y = y - 1
        return y

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(3)
    same(cf(x), f(x))
    bag.items.append("b")
    same(cf(x), f(x))
    bag.items.clear()
    same(cf(x), f(x))


def test_module_list_after_del_is_an_ordered_dict_and_still_guarded():
    mods = nn.ModuleList([nn.Tanh(), nn.Sigmoid()])
    del mods[1]  # torch rebuilds _modules as an OrderedDict

    def f(x):
        for m in mods:
            x = m(x)
        return x

    cf = refcomp.compile(f, backend="eager")
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "guards fail right after tracing"
        same(cf(x), f(x))
    assert cf.cache.entries and cf.cache.entries[0].graph is not None
    mods.append(nn.ReLU())
    same(cf(x), f(x))


# --- hooks on submodules --------------------------------------------------------------------
@pytest.mark.parametrize("hook", ["forward", "forward_pre", "global_forward"])
def test_hook_registered_on_a_submodule_after_compiling(hook):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x) * 2

    m = M()
    cm = refcomp.compile(m, backend="eager")
    x = torch.randn(2, 3)
    same(cm(x), m(x))
    if hook == "forward":
        handle = m.fc.register_forward_hook(lambda mod, args, out: out + 100)
    elif hook == "forward_pre":
        handle = m.fc.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    else:
        handle = nn.modules.module.register_module_forward_hook(
            lambda mod, args, out: out + 1)
    try:
        same(cm(x), m(x))          # the hook runs, as in eager
    finally:
        handle.remove()
    same(cm(x), m(x))              # and stops running once removed
