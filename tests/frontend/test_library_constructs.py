"""Python constructs that Hugging Face `transformers` models run inside `forward`, each
reduced to a few lines: captured without a break (where Dynamo captures it too), equal to
eager, and guarded (a changed fact recompiles).  The models themselves are in
tests/models/test_transformers.py; spec/tracer.md, "Python features", says what is traced.
"""

import abc
import collections.abc
import contextvars
import copy
import functools
import inspect
import os
import types
import warnings

import pytest
import torch

import refcomp


def explain(fn, *args, **kwargs):
    refcomp.reset()
    return refcomp.explain(fn, *args, backend="eager", **kwargs)


# --- super() ---------------------------------------------------------------------------------
class Registry(dict):
    """transformers' _CanRecordRegistry: a dict subclass keyed by class name."""

    def get(self, model):
        return super().get(type(model).__name__) or {}


REGISTRY = Registry()


class Base(torch.nn.Module):
    def scale(self, x):
        return x * 2

    @classmethod
    def offset(cls):
        return 1 if cls is Base else 3


class Child(Base):
    def scale(self, x):
        return super().scale(x) + super(Child, self).offset()

    def forward(self, x):
        flags = REGISTRY.get(self)
        for key in flags:
            x = x + flags[key]
        return self.scale(x)


def test_zero_argument_super_is_traced():
    # Was a break at every call ("call of type <class 'super'>"): 128 breaks over the six
    # transformers models, all in _CanRecordRegistry.get.
    REGISTRY.clear()
    REGISTRY["Child"] = {"a": 1.5, "b": 2}
    model, x = Child(), torch.randn(3)
    report = explain(model, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, model(x))
    assert model(torch.zeros(1)).item() == (1.5 + 2) * 2 + 3


def test_super_read_of_a_registry_is_guarded():
    REGISTRY.clear()
    REGISTRY["Child"] = {"a": 1.0}
    refcomp.reset()
    model, x = Child(), torch.randn(3)
    compiled = refcomp.compile(model, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))
    REGISTRY["Child"] = {"a": 5.0, "b": -1.0}  # a new entry: recompiles
    torch.testing.assert_close(compiled(x), model(x))
    del REGISTRY["Child"]  # absent: super().get returns None, `or {}`
    torch.testing.assert_close(compiled(x), model(x))
    assert refcomp.stats()["counters"]["graphs"] >= 3


# --- exceptions raised and handled inside inlined functions ----------------------------------
def _env_flag(name):
    return os.environ.get(name, "0") == "1"  # Mapping.get: try: self[key] except KeyError


def uses_env(x):
    # transformers' sdpa_attention reads os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] this way
    return x + 1 if _env_flag("REFCOMP_TEST_FLAG_UNSET") else x - 1


def test_os_environ_get_of_a_missing_key_is_traced_and_guarded(monkeypatch):
    # Was a break ("exception raised while tracing: _Environ[...]") at every read: 11 of
    # Llama's 31 breaks.
    monkeypatch.delenv("REFCOMP_TEST_FLAG_UNSET", raising=False)
    x = torch.randn(3)
    report = explain(uses_env, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, x - 1)
    refcomp.reset()
    compiled = refcomp.compile(uses_env, backend="eager")
    torch.testing.assert_close(compiled(x), x - 1)
    monkeypatch.setenv("REFCOMP_TEST_FLAG_UNSET", "1")  # the key's absence was guarded
    torch.testing.assert_close(compiled(x), x + 1)


def _lookup(d, key):
    try:
        return d[key]
    except KeyError:
        return None


def _strict(d, key):
    if key not in d:
        raise ValueError(f"no {key}")  # caught by the caller's handler
    return d[key]


def _checked(d, key):
    try:
        return _strict(d, key)
    except (TypeError, ValueError) as e:
        return len(str(e))


def handlers(x, table):
    a = _lookup({"w": 2.0}, "v")  # a frame-local dict: KeyError handled
    b = _lookup(table, "scale")
    c = _checked(table, "missing")
    d = _checked(table, "scale")
    return x * (b if a is None else 0) + c + d


def test_exceptions_raised_and_handled_in_inlined_functions_do_not_break():
    x, table = torch.randn(3), {"scale": 3.0}
    report = explain(handlers, x, table)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, handlers(x, table))
    refcomp.reset()
    compiled = refcomp.compile(handlers, backend="eager")
    torch.testing.assert_close(compiled(x, table), handlers(x, table))
    other = {"scale": 0.5, "missing": 2.0}  # other keys (guarded): another path
    torch.testing.assert_close(compiled(x, other), handlers(x, other))


def _fails(d):
    return d["absent"]  # no handler anywhere in the inlined chain


def test_an_unhandled_exception_still_reaches_the_user():
    def f(x, d):
        y = x + 1
        return _fails(d) + y

    refcomp.reset()
    with pytest.raises(KeyError, match="absent"):
        refcomp.compile(f, backend="eager")(torch.randn(2), {"present": 1})

    def g(x, d):  # a handler in the compiled frame itself: CPython runs it at the break
        try:
            return _fails(d) + x
        except KeyError:
            return x - 1

    x = torch.randn(2)
    torch.testing.assert_close(refcomp.compile(g, backend="eager")(x, {}), x - 1)


# --- context variables (transformers' capture_outputs) ---------------------------------------
COLLECTOR = contextvars.ContextVar("collector", default=None)


class FlagVar:
    """transformers' CompileableContextVar: a ContextVar, or under torch.compile a plain
    attribute plus a `compiling` flag that the same methods assign (a read of it was a
    break, as for a counter)."""

    def __init__(self):
        self.var, self.global_var, self.compiling = COLLECTOR, None, False

    def get(self):
        return self.global_var if self.compiling else self.var.get()

    def set(self, value):
        if torch.compiler.is_compiling():
            self.global_var, self.compiling = value, True
            return None
        return self.var.set(value)

    def reset(self, token):
        if self.compiling or token is None:
            self.global_var, self.compiling = None, False
        else:
            self.var.reset(token)


ACTIVE = FlagVar()


def _inner(x, var):
    seen = var.get()
    seen["n"] = 1
    return x * 2


def collects(x, var=COLLECTOR):
    collected = {}
    token = var.set(collected)
    try:
        out = _inner(x, var)
    finally:
        var.reset(token)
    return out + len(collected)


def test_context_var_set_get_reset_is_traced_and_leaves_the_context_unchanged():
    # ContextVar.set / reset and the `compiling` read broke at every transformers forward
    # (GPT-2: 8 of its 19 breaks).
    x = torch.randn(3)
    report = explain(collects, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, collects(x))
    assert COLLECTOR.get() is None  # the set was undone by the reset, as in eager
    compiled = refcomp.compile(collects, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), x * 2 + 1)
        assert COLLECTOR.get() is None


def test_compileable_context_var_takes_its_compile_path_and_is_left_unset():
    # Under a compiler transformers' wrapper keeps the value in an attribute (is_compiling()
    # answers True while refcomp traces, as under Dynamo): set/get/reset are attribute
    # writes and reads, replayed, and leave the wrapper as eager does.
    x = torch.randn(3)
    report = explain(collects, x, ACTIVE)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, x * 2 + 1)
    assert (ACTIVE.global_var, ACTIVE.compiling, COLLECTOR.get()) == (None, False, None)
    compiled = refcomp.compile(collects, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(x, ACTIVE), x * 2 + 1)
        assert (ACTIVE.global_var, ACTIVE.compiling, COLLECTOR.get()) == (None, False, None)


def sets_only(x):
    COLLECTOR.set("left set")  # the token is dropped: eager leaves the variable set
    return x + 1


def reads_unset(x):
    return x + (1 if COLLECTOR.get() is None else 2)  # no traced set: a break


def test_a_context_var_set_without_reset_is_replayed_and_an_untraced_get_breaks():
    x = torch.randn(3)
    ctx = contextvars.copy_context()
    report = ctx.run(explain, sets_only, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert ctx[COLLECTOR] == "left set"
    ctx = contextvars.copy_context()
    report = ctx.run(explain, reads_unset, x)
    assert report.graph_break_count >= 1 and "ContextVar.get" in str(report), report
    torch.testing.assert_close(report.result, x + 1)


# --- transformers ModelOutput ----------------------------------------------------------------
def _output_classes():
    transformers = pytest.importorskip("transformers")
    return transformers.modeling_outputs


def test_model_outputs_are_made_read_and_returned_without_a_break():
    # Their construction and their return were two breaks in every transformers model.
    mo = _output_classes()

    def f(x, w):
        inner = mo.BaseModelOutputWithPast(last_hidden_state=x @ w, hidden_states=None)
        h = inner[0] + inner.last_hidden_state + inner["last_hidden_state"]
        out = mo.CausalLMOutputWithPast(None, h.sum(-1), None, hidden_states=(x, h))
        out["attentions"] = (h,)  # transformers' capture_outputs sets collected outputs
        out.past_key_values = None  # a None field: the attribute only
        n = len(out) + len(out.to_tuple()) + ("loss" in out) + (out.loss is None)
        return out, n, hasattr(out, "logits"), isinstance(out, dict), list(out.keys())

    x, w = torch.randn(2, 3), torch.randn(3, 3)
    want = f(x, w)
    report = explain(f, x, w)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = report.result
    assert type(got[0]) is type(want[0]) and list(got[0].keys()) == list(want[0].keys())
    for k in want[0].keys():
        torch.testing.assert_close(got[0][k], want[0][k])
    assert got[0].loss is None and got[0].past_key_values is None
    torch.testing.assert_close(got[0].to_tuple()[0], want[0].to_tuple()[0])
    assert got[1:] == want[1:]


def test_a_model_output_made_and_read_with_the_old_cache_name_is_traced():
    # transformers 5.24 renamed the field `past_key_values` to `cache`: a metaclass wraps
    # each output's __init__ to rename the keyword, and ModelOutput maps the old name as
    # key and attribute.  Their construction broke (the __init__ was not dataclasses').
    # (With transformers 5.23 the field is still `past_key_values`: the same calls.)
    mo = _output_classes()

    def f(x, cache):
        out = mo.BaseModelOutputWithPast(last_hidden_state=x * 2, past_key_values=cache)
        same = (out.past_key_values is cache, out["past_key_values"] is cache,
                "past_key_values" in out, out.get("past_key_values") is cache)
        out["past_key_values"] = cache  # __setitem__ renames too
        return out, same, len(out)

    x, cache = torch.randn(2, 3), Cache(torch.randn(1, 3))
    want = f(x, cache)
    report = explain(f, x, cache)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = report.result
    assert got[1:] == want[1:] == ((True,) * 4, 2)
    assert type(got[0]) is type(want[0]) and list(got[0].keys()) == list(want[0].keys())
    assert got[0].past_key_values is cache
    torch.testing.assert_close(got[0].last_hidden_state, want[0].last_hidden_state)


def test_a_model_output_of_a_lone_non_tensor_still_equals_eager():
    mo = _output_classes()

    def f(x):  # __post_init__ reads a lone dict as key/value pairs: not traced
        out = mo.BaseModelOutput({"last_hidden_state": x + 1})
        return out.last_hidden_state * 2

    x = torch.randn(3)
    refcomp.reset()
    torch.testing.assert_close(refcomp.compile(f, backend="eager")(x), f(x))
    report = explain(f, x)
    assert report.graph_break_count == 1 and "key/value pairs" in str(report), report


@functools.cache
def _pair_output_class():
    import dataclasses

    mo = _output_classes()

    @dataclasses.dataclass
    class PairOutput(mo.ModelOutput):  # CLIPOutput's shape: nested outputs, its own to_tuple
        logits: torch.Tensor | None = None
        inner: mo.BaseModelOutput = None

        def to_tuple(self):
            return tuple(v.to_tuple() if isinstance(v, mo.ModelOutput) else v
                         for v in self.values())

    return PairOutput


def test_a_model_output_with_its_own_to_tuple_is_traced():
    # CLIPOutput overrides to_tuple (its nested outputs become tuples too): constructing
    # it broke, CLIPModel's one break; Dynamo makes 1 graph.  Its to_tuple is inlined.
    mo, pair = _output_classes(), _pair_output_class()

    def f(x):
        out = pair(logits=x * 2, inner=mo.BaseModelOutput(last_hidden_state=x + 1))
        t = out.to_tuple()
        return out, t[1][0] * 3, len(t), type(t[1]) is tuple

    x = torch.randn(2, 3)
    want = f(x)
    report = explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = report.result
    assert type(got[0]) is pair and list(got[0].keys()) == ["logits", "inner"]
    assert type(got[0].inner) is mo.BaseModelOutput
    torch.testing.assert_close(got[0].logits, want[0].logits)
    torch.testing.assert_close(got[0].inner.last_hidden_state, want[0].inner.last_hidden_state)
    torch.testing.assert_close(got[1], want[1])
    assert got[2:] == want[2:] == (2, True)
    torch.testing.assert_close(got[0].to_tuple()[1][0], want[0].to_tuple()[1][0])


# --- functools.lru_cache, assume_constant_result --------------------------------------------
PROBED = []


def _compile_constant(fn):  # transformers' _make_compile_constant: assume_constant_result
    fn._dynamo_marked_constant = True
    return fn


@functools.lru_cache
@_compile_constant
def _distributed_available() -> bool:  # transformers' is_torch_distributed_available
    PROBED.append(1)
    return torch.distributed.is_available()


@functools.lru_cache
def _doubled(n):
    return n * 2


def test_lru_cache_wrapped_functions_are_traced_and_marked_constants_folded():
    # Wav2Vec2 (`is_fsdp_managed_module` -> `is_torch_distributed_available()`, an
    # lru_cache wrapper) broke at the call: "call of _lru_cache_wrapper".  As Dynamo does,
    # the wrapped function is traced (the cache skipped), and one marked
    # `_dynamo_marked_constant` (torch._dynamo.assume_constant_result) is called once
    # while tracing, its result a constant.
    def f(x):
        if _distributed_available():
            x = x + 1
        return x * _doubled(3)

    x = torch.randn(3)
    want = f(x)
    PROBED.clear()
    _distributed_available.cache_clear()
    report = explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, want)
    assert PROBED == [1]  # called once, while tracing (the cache then answers)
    torch.testing.assert_close(refcomp.compile(f, backend="eager")(x), want)
    assert PROBED == [1]


# --- an attribute a method may set, read first ----------------------------------------------
class Windowed(torch.nn.Module):
    """transformers' SwinLayer: `set_shift_and_window_size` clamps the window to the input
    resolution, reading `self.window_size` before it may assign it."""

    def __init__(self, window):
        super().__init__()
        self.window_size, self.calls = window, 0

    def set_window_size(self, resolution):
        if min(resolution) <= self.window_size:
            self.window_size = min(resolution)

    def count(self):
        self.calls += 1

    def forward(self, x, counting=False):
        self.set_window_size(x.shape[-2:])
        if counting:
            self.count()
        return x * self.window_size


def test_an_attribute_a_method_may_set_is_read_in_the_graph_unless_it_counts():
    # Swin broke at `self.window_size` in `set_shift_and_window_size` (which assigns it):
    # a number the code assigns was read outside the graph so that a counter would not
    # recompile at every call; only a store computed from the attribute itself
    # (`self.calls += 1`) is a counter (Note [Reading what the frame writes]).
    m, twin = Windowed(4), Windowed(4)
    x = torch.randn(8, 8)
    refcomp.reset()
    report = refcomp.explain(m, backend="eager")(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, twin(x))
    small = torch.randn(3, 3)  # the window shrinks to 3: the store is replayed
    compiled = refcomp.compile(m, backend="eager")
    for inp in (small, x, small):
        torch.testing.assert_close(compiled(inp), twin(inp))
        assert m.window_size == twin.window_size
    assert m.window_size == 3
    refcomp.reset()
    report = refcomp.explain(m, backend="eager")(x, counting=True)
    assert report.graph_break_count == 1, report  # the counter is still read outside
    assert "'calls' is assigned" in str(report), report
    assert m.calls == 1


# --- globals of wrappers ---------------------------------------------------------------------
def _fake_module(name, source, **values):
    namespace = {"__name__": name, "functools": functools, **values}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace


def test_a_wraps_wrapper_reads_its_own_modules_globals_under_guards():
    # functools.wraps copies the wrapped function's __module__ onto the wrapper, whose
    # globals are another module's: both dicts were named G['lib_a'] in the guards, which
    # then read SCALE from the wrong one, failed right after tracing, and ran eagerly
    # (every transformers model: capture_outputs wraps forward this way).
    lib_a = _fake_module("lib_a", "def inner(x):\n    return x * SCALE\n", SCALE=2.0)
    lib_b = _fake_module("lib_b", "def deco(fn):\n    @functools.wraps(fn)\n"
                                  "    def wrapper(x):\n        return fn(x) + SCALE\n"
                                  "    return wrapper\n", SCALE=5.0)
    wrapped = lib_b["deco"](lib_a["inner"])
    assert wrapped.__module__ == "lib_a"

    def f(x):
        return wrapped(x) - 1

    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "guards fail right after tracing" is a warning
        report = explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, x * 2 + 5 - 1)


def test_finfo_of_a_dtype_is_folded():
    # T5's sdpa path: torch.finfo(dtype).min was "not in the torch table" (39 breaks)
    def f(x):
        return x.clamp(min=torch.finfo(x.dtype).min / 2, max=torch.iinfo(torch.int8).max)

    x = torch.randn(4) * 1000
    report = explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, f(x))


def test_a_flag_the_frame_also_assigns_is_read_under_a_guard():
    var = FlagVar()

    def f(x, token):  # the compiled frame is FlagVar.reset-like: reads and writes a flag
        if var.compiling or token is None:
            var.compiling = False
            return x + 1
        return x - 1

    x = torch.randn(3)
    report = explain(f, x, None)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    refcomp.reset()
    compiled = refcomp.compile(f, backend="eager")
    torch.testing.assert_close(compiled(x, 1), x - 1)
    var.compiling = True  # guarded: recompiles
    torch.testing.assert_close(compiled(x, 1), x + 1)
    assert var.compiling is False


def test_a_reset_of_a_real_token_is_replayed():
    def f(x, token):
        COLLECTOR.reset(token)  # the set ran before the call
        return x * 2

    x = torch.randn(3)

    def run():
        token = COLLECTOR.set("outer")
        report = explain(f, x, token)
        return report, COLLECTOR.get()

    report, after = contextvars.copy_context().run(run)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    assert after is None  # the reset was replayed after the graph


class Cache:
    """A KV-cache-like object: passed in, read, handed back (transformers' DynamicCache)."""

    def __init__(self, k):
        self.k = k


def test_returning_an_object_the_frame_read_keeps_the_graph():
    # The result spec holds tensors and constants only: returning `past_key_values` (an
    # object guarded by type) made the frame run wholly eagerly ("traces whole here but
    # not in the first trace"), so every decoding step after the first was eager.
    def f(x, cache):
        y = torch.cat([cache.k, x], 0)
        return {"y": y * 2, "cache": cache, "pair": (cache, x)}, cache

    x, cache = torch.randn(2, 3), Cache(torch.randn(1, 3))
    report = explain(f, x, cache)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got, want = report.result, f(x, cache)
    assert got[1] is cache and got[0]["cache"] is cache and got[0]["pair"][0] is cache
    assert got[0]["pair"][1] is x
    torch.testing.assert_close(got[0]["y"], want[0]["y"])
    refcomp.reset()
    compiled = refcomp.compile(f, backend="eager")
    other = Cache(torch.randn(1, 3))  # another object of the type: re-read, not baked in
    for c in (cache, other):
        out = compiled(x, c)
        assert out[1] is c
        torch.testing.assert_close(out[0]["y"], f(x, c)[0]["y"])


# --- checks transformers skips under a compiler ----------------------------------------------
def _is_tracing(tensor=None):
    """transformers' is_tracing: torch.compile, torch.jit or a fake tensor."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def _ignore_mask(padding_mask):
    """transformers' _ignore_bidirectional_mask_sdpa: an all-True padding mask is dropped so
    SDPA may use a faster kernel -- a data-dependent check it skips while tracing."""
    return not (torch.compiler.is_exporting() or _is_tracing(padding_mask)) and \
        bool(padding_mask.all())


def masked_scores(x, padding_mask):
    if _ignore_mask(padding_mask):
        return x.softmax(-1)
    return x.masked_fill(~padding_mask[:, None, :], float("-inf")).softmax(-1)


@pytest.mark.parametrize("padded", [False, True])
def test_a_padding_mask_check_skipped_under_a_compiler_does_not_break(padded):
    # BERT and BART: `padding_mask.all()` deciding a branch was a break (RB003) at every
    # forward; refcomp answers "compiling" as Dynamo does, so the mask is always applied,
    # which gives the same values as dropping an all-True mask.
    x, mask = torch.randn(2, 3, 4), torch.ones(2, 4, dtype=torch.bool)
    if padded:
        mask[1, 3] = False
    report = explain(masked_scores, x, mask)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, masked_scores(x, mask))


# --- callable() and inspect.signature --------------------------------------------------------
def _and_masks(*fns):
    """transformers' and_masks: checks that every argument is callable, returns a closure."""
    if not all(callable(f) for f in fns):
        raise RuntimeError(f"not callable: {fns}")

    def both(x):
        out = torch.ones_like(x, dtype=torch.bool)
        for f in fns:
            out = out & f(x)
        return out
    return both


class Gate(torch.nn.Module):
    def gate(self, x):
        return x < 2.0

    def forward(self, x):
        keep = _and_masks(lambda t: t > 0, functools.partial(torch.lt, other=1.5), self.gate)
        n = callable(x) + 2 * callable((x, 1)) + 4 * callable(self) + 8 * callable(HOLDER.value)
        return torch.where(keep(x), x, 0.0) + n


class Holder:
    value = staticmethod(abs)


HOLDER = Holder()


def test_callable_of_traced_values_is_answered_and_guarded():
    # transformers' and_masks / or_masks and inspect.signature call callable() on closures
    # made in the frame and on bound methods: "builtins.callable is not in the torch table"
    # was a break in every BERT forward.
    model, x = Gate(), torch.tensor([-1.0, 1.0, 1.7, 3.0])
    report = explain(model, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, model(x))
    assert model(x)[0].item() == 12  # callable(module) and callable(abs) only
    refcomp.reset()
    compiled = refcomp.compile(model, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))
    HOLDER.value = 3  # no longer callable: guarded, so the answer changes
    try:
        torch.testing.assert_close(compiled(x), model(x))
        assert compiled(x)[0].item() == 4
    finally:
        HOLDER.value = staticmethod(abs)


def apply_chunking(forward_fn, *tensors):
    """transformers' apply_chunking_to_forward: counts forward_fn's parameters."""
    if len(inspect.signature(forward_fn).parameters) != len(tensors):
        raise ValueError("wrong number of tensors")
    return forward_fn(*tensors)


def _scaled(h, scale=3.0):
    return h * scale


class Chunked(torch.nn.Module):
    def chunk(self, h, g):
        return h * 2 + g

    def forward(self, x):
        return apply_chunking(self.chunk, x, x) + apply_chunking(_scaled, x, 2.0)


def test_inspect_signature_of_a_bound_method_or_function_is_folded():
    # BERT's apply_chunking_to_forward: inspect.signature broke (at callable(), then at
    # the isinstance checks of inspect's own code) in every layer.
    model, x = Chunked(), torch.randn(3)
    report = explain(model, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, model(x))


# --- slices of module containers -------------------------------------------------------------
class Stack(torch.nn.Module):
    """Llama's `for layer in self.layers[: config.num_hidden_layers]`, a sliced Sequential
    called, and an item of a slice."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(),
                                       torch.nn.Linear(4, 4))
        self.n = 2

    def forward(self, x):
        for layer in self.layers[: self.n]:
            x = layer(x)
        x = self.seq[1:](x)
        return x + self.layers[-2:][1](x) * len(self.layers[1:])


def _grads(model, out):
    model.zero_grad(set_to_none=True)
    out.pow(2).sum().backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def test_slicing_a_module_list_or_sequential_is_traced_and_guarded():
    # Llama: "slicing a ModuleList/Sequential" was a break (RB013), and the loop over the
    # slice continued across it (RB019).
    torch.manual_seed(0)
    model, x = Stack(), torch.randn(2, 4)
    report = explain(model, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, model(x))
    refcomp.reset()
    compiled = refcomp.compile(model)  # llvm, training: the parameters are graph inputs
    got, want = _grads(model, compiled(x)), _grads(model, model(x))
    assert got.keys() == want.keys() and len(want) == 8  # seq.0 is sliced off
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)
    model.n = 3  # the slice bound is guarded
    torch.testing.assert_close(compiled(x), model(x))
    model.layers.append(torch.nn.Linear(4, 4))  # the container's keys are guarded
    torch.testing.assert_close(compiled(x), model(x))


class Projected(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def chunk(self, h, g):
        return self.lin(h) + g


def test_a_bound_method_argument_is_guarded_by_its_function_and_object():
    # apply_chunking_to_forward compiled as a frame of its own (after a break inside it)
    # is handed `self.feed_forward_chunk`, a new bound method at every call: the identity
    # guard on it failed every time (recompiles up to the limit, then eager), and the
    # method's module was read without a source (its weights could not be graph inputs).
    torch.manual_seed(0)
    model, x = Projected(), torch.randn(2, 3)
    report = explain(apply_chunking, model.chunk, x, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, model.chunk(x, x))
    refcomp.reset()
    compiled = refcomp.compile(apply_chunking, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(model.chunk, x, x), model.chunk(x, x))
    assert refcomp.stats()["counters"]["graphs"] == 1
    assert not refcomp.stats()["recompiles"]
    other = Projected()  # another object, another function: guarded, not reused
    torch.testing.assert_close(compiled(other.chunk, x, x), other.chunk(x, x))
    torch.testing.assert_close(compiled(Chunked().chunk, x, x), x * 3)


# --- torch.nn modules made inside forward; string attributes the frame assigns ----------------
class ClassifierHead(torch.nn.Module):
    """BertForSequenceClassification's loss: `config.problem_type` decided on the first
    call and assigned, then a loss module made inside forward."""

    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(problem_type=None)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, labels):
        logits = self.lin(x)
        if self.config.problem_type is None:
            self.config.problem_type = "single_label" if labels.dtype == torch.long \
                else "multi_label"
        if self.config.problem_type == "single_label":
            loss = torch.nn.CrossEntropyLoss()(logits, labels)
        else:
            loss = torch.nn.BCEWithLogitsLoss(reduction="sum")(logits, labels)
        return loss, logits


def test_a_loss_module_made_in_forward_and_a_string_the_frame_assigns_do_not_break():
    # BERT heads with labels: "CrossEntropyLoss is not in the torch table" (RB004), and
    # `self.config.problem_type = ...` then read: a string attribute the frame assigns
    # (RB008 at each read once it was set).
    torch.manual_seed(0)
    model, x = ClassifierHead(), torch.randn(2, 4)
    for labels in (torch.tensor([0, 2]), torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])):
        model.config.problem_type = None
        for _ in range(2):  # unset, then set by the first call
            report = explain(model, x, labels)
            assert (report.graph_count, report.graph_break_count) == (1, 0), report
            model.config.problem_type = None
            want = model(x, labels)
            model.config.problem_type = None
            got = refcomp.compile(model, backend="eager")(x, labels)
            torch.testing.assert_close(got, want)
            assert model.config.problem_type in ("single_label", "multi_label")
    refcomp.reset()
    compiled = refcomp.compile(model)  # training: the loss's gradients
    model.zero_grad()
    compiled(x, labels)[0].backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model(x, labels)[0].backward()
    for n, p in model.named_parameters():
        torch.testing.assert_close(got[n], p.grad, msg=n)


def makes_and_returns_a_module(x):
    act = torch.nn.Softplus(beta=2.0)
    return act(x), act


def test_a_module_made_in_forward_is_a_new_object_at_every_call():
    # The module is made at trace time to trace its call; one that leaves the frame must
    # still be a new object per call, as in eager, never the trace's.
    x = torch.randn(3)
    compiled = refcomp.compile(makes_and_returns_a_module, backend="eager")
    (a, m1), (b, m2) = compiled(x), compiled(x)
    torch.testing.assert_close(a, torch.nn.functional.softplus(x, beta=2.0))
    torch.testing.assert_close(b, a)
    assert m1 is not m2 and isinstance(m1, torch.nn.Softplus) and m1.beta == 2.0


def test_a_module_with_parameters_made_in_forward_still_breaks():
    # Its initialization draws from the global RNG at every call: not made at trace time.
    def f(x):
        return torch.nn.Linear(3, 3)(x)

    x = torch.randn(2, 3)
    report = explain(f, x)
    assert report.graph_break_count >= 1 and "Linear" in str(report.break_reasons), report
    refcomp.reset()
    compiled = refcomp.compile(f, backend="eager")
    torch.manual_seed(1)
    got = compiled(x), torch.rand(2)  # tracing drew nothing: the streams agree
    torch.manual_seed(1)
    want = f(x), torch.rand(2)
    torch.testing.assert_close(got, want)


# --- objects of user classes made in the frame (transformers' DynamicCache) -----------------
class LayerMixin(abc.ABC):
    """transformers' CacheLayerMixin: an ABC with class attributes and abstract methods."""

    is_sliding = False

    def __init__(self):
        self.keys = None
        self.is_initialized = False

    @abc.abstractmethod
    def update(self, k): ...


class GrowingLayer(LayerMixin):
    """DynamicLayer: lazily initialized, grows by concatenation."""

    def lazy_initialization(self, k):
        self.keys = torch.tensor([], dtype=k.dtype, device=k.device)
        self.is_initialized = True

    def update(self, k):
        if not self.is_initialized:
            self.lazy_initialization(k)
        self.keys = torch.cat([self.keys, k], dim=-2)
        return self.keys

    def get_seq_length(self):
        if not self.is_initialized or self.keys.numel() == 0:
            return 0
        return self.keys.shape[-2]


class LayeredCache:
    """Cache: a list of layers, a property, __len__."""

    def __init__(self, layers=None):
        self.layers = layers if layers is not None else []

    @property
    def is_sliding(self):
        return [layer.is_sliding for layer in self.layers]

    def __len__(self):
        return len(self.layers)

    def update(self, k, i):
        return self.layers[i].update(k)

    def get_seq_length(self, i=0):
        return self.layers[i].get_seq_length() if self.layers else 0


class GrowingCache(LayeredCache):
    """DynamicCache(config=...): makes its layers, then super().__init__."""

    def __init__(self, n):
        layers = [GrowingLayer() for _ in range(n)]
        super().__init__(layers=layers)


def decode_step(x, cache=None):
    if cache is None:
        cache = GrowingCache(2)
    past = cache.get_seq_length()
    h = x
    for i in range(len(cache)):
        k = cache.update(h * (i + 1), i)
        h = h + k.sum(-2, keepdim=True)
    return h, cache, past, isinstance(cache, LayeredCache), any(cache.is_sliding)


def test_an_object_of_a_user_class_made_in_the_frame_is_traced_and_returned():
    # GPT-2, Llama, T5 and BART make a DynamicCache inside forward: "constructing a
    # DynamicCache: objects of classes made outside torch are not traced" broke each.
    x = torch.randn(1, 3, 4)
    want = decode_step(x)
    report = explain(decode_step, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    got = report.result
    torch.testing.assert_close(got[0], want[0])
    assert got[2:] == want[2:] == (0, True, False)
    cache = got[1]
    assert type(cache) is GrowingCache and len(cache.layers) == 2
    for layer, ref in zip(cache.layers, want[1].layers):
        assert type(layer) is GrowingLayer and layer.is_initialized
        torch.testing.assert_close(layer.keys, ref.keys)
    # The next step is handed the object back (a real object now, read under guards).
    refcomp.reset()
    compiled = refcomp.compile(decode_step, backend="eager")
    c1, c2 = compiled(x)[1], decode_step(x)[1]
    for step in range(3):
        t = torch.randn(1, 1, 4)
        a, b = compiled(t, c1), decode_step(t, c2)
        torch.testing.assert_close(a[0], b[0])
        assert a[1] is c1 and a[2] == b[2] == 3 + step
        torch.testing.assert_close(c1.layers[1].keys, c2.layers[1].keys)


class Record:
    def __init__(self, value):
        self.value = value
        self.twice = [value, value]


SEEN: list = []


def object_across_a_break(x):
    r = Record(x * 2)
    alias = r
    SEEN.append(r)  # handed to a replayed effect: the same object eager appends
    n = int(x.sum())  # a graph break: r is live across it
    alias.total = alias.value + n  # (after the break: the real object, rebuilt once)
    return r, alias.twice[0]


def test_an_object_made_in_the_frame_crosses_a_break_as_one_object():
    SEEN.clear()
    x = torch.ones(3)
    report = explain(object_across_a_break, x)
    r, first = report.result
    assert report.graph_break_count == 1 and report.break_reasons[0]["id"] == "RB002", report
    assert type(r) is Record and len(SEEN) == 1 and SEEN[0] is r and r.twice[0] is first
    assert r.twice[1] is r.twice[0] is r.value  # one tensor under three names, as eager's
    torch.testing.assert_close(r.total, x * 2 + 3)
    torch.testing.assert_close(first, x * 2)


class Guarded:
    def __setattr__(self, name, value):  # a class that intercepts its attributes
        object.__setattr__(self, name, value * 2)

    def __init__(self, v):
        self.v = v


def test_a_class_with_its_own_setattr_still_breaks_with_a_reason():
    def f(x):
        return Guarded(x).v + 1

    x = torch.randn(3)
    report = explain(f, x)
    torch.testing.assert_close(report.result, x * 2 + 1)
    assert any("Guarded" in r["reason"] for r in report.break_reasons), report


class LayerView(collections.abc.Sequence):
    """transformers' _PerLayerConfigView: a Sequence over Python __len__/__getitem__."""

    def __init__(self, n):
        self._n = n

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if i < 0 or i >= self._n:
            raise IndexError("list index out of range")
        return (i + 1) * 10


class Config:
    n = 3

    @property
    def per_layer(self):  # a new view at every read, as transformers' per_layer_config
        return LayerView(self.n)


def over_views(x, cfg):
    made = [v for v in LayerView(2)]  # made in the frame
    read = [v for v in cfg.per_layer]  # read from an argument
    return x * sum(made) + sum(read), len(read)


def test_a_python_sequence_is_iterated_until_index_error():
    # GPT-2, Llama...: get_layer_types_and_kwargs iterates config.per_layer_config
    # ("iteration over ....config.per_layer_config" broke once the cache was traced).
    x, cfg = torch.randn(3), Config()
    report = explain(over_views, x, cfg)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result[0], over_views(x, cfg)[0])
    assert report.result[1] == 3
    refcomp.reset()
    compiled = refcomp.compile(over_views, backend="eager")
    other = Config()
    other.n = 4  # another length: the guards on the view see it
    for c in (cfg, other, cfg):
        got, want = compiled(x, c), over_views(x, c)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


# --- copy.deepcopy of a config -----------------------------------------------------------
class TinyConfig:
    """transformers' PreTrainedConfig in miniature: an attribute map read through its own
    __getattribute__ and written through its own __setattr__, nested plain data."""

    attribute_map = {"num_hidden_layers": "encoder_layers"}
    offset = 1.0  # a class-level default, read through the copy

    def __init__(self, encoder_layers=2, decoder_layers=3):
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.decoder_scale = 0.5
        self.layer_types = ["full", "full", "sliding"]
        self.extra = {"rope": {"theta": 10.0}}

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def get_text_config(self, decoder=True):
        # as PreTrainedConfig.get_text_config for T5/BART: a copy with the decoder's
        # keys moved over the shared ones
        out = copy.deepcopy(self)
        prefix = "decoder" if decoder else "encoder"
        for key in out.to_dict():
            if key.startswith(prefix):
                new_key = "num_hidden_layers" if key == prefix + "_layers" else \
                    key[len(prefix) + 1:]
                value = getattr(out, key)
                delattr(out, key)
                setattr(out, new_key, value)
        return out


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


class CopiesItsConfig(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, x):
        text = self.config.get_text_config(decoder=True)
        for _ in range(text.num_hidden_layers):  # 3: the decoder's, not the encoder's 2
            x = x * text.scale + len(text.layer_types)
        x = x + text.extra["rope"]["theta"] + text.offset  # the copy's dicts, its class
        made = copy.deepcopy({"p": Point(1, [2, 3]), "q": (4, [5])})
        made["p"].y.append(x.shape[0])  # the copy is the trace's own: changed symbolically
        return x + sum(made["p"].y) + made["q"][1][0]


def test_a_config_deep_copied_inside_forward_is_one_graph():
    # T5 and BART: DynamicCache(config=...) calls config.get_text_config(decoder=True),
    # which deep-copies the config: "builtins.id is not in the torch table" (inside
    # copy.deepcopy) broke it, and two breaks followed (4 graphs, 3 breaks; Dynamo 1/0).
    config = TinyConfig()
    model = CopiesItsConfig(config)
    x = torch.randn(4)
    want = model(x)
    report = explain(model, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report
    torch.testing.assert_close(report.result, want)
    # The copy's writes never reach the config itself.
    assert config.decoder_layers == 3 and config.encoder_layers == 2
    assert "scale" not in vars(config) and "num_hidden_layers" not in vars(config)
    compiled = refcomp.compile(model, backend="eager")
    torch.testing.assert_close(compiled(x), want)
    # Everything the copy read is guarded: a changed config recompiles, as eager differs.
    for change in (lambda c: setattr(c, "decoder_layers", 1),
                   lambda c: setattr(c, "decoder_scale", 2.0),
                   lambda c: c.layer_types.append("full"),
                   lambda c: c.extra["rope"].update(theta=-0.0),
                   lambda c: setattr(type(c), "offset", 5.0)):
        change(config)
        torch.testing.assert_close(compiled(x), model(x))
    assert config.decoder_layers == 1
    TinyConfig.offset = 1.0


def copy_then_return(x, cfg):
    return x + 1, copy.deepcopy(cfg)


def test_a_deep_copy_returned_is_a_new_object_at_every_call():
    cfg = TinyConfig()
    refcomp.reset()
    compiled = refcomp.compile(copy_then_return, backend="eager")
    x = torch.randn(2)
    a, b = compiled(x, cfg)[1], compiled(x, cfg)[1]
    assert type(a) is TinyConfig and a is not b and a is not cfg
    assert vars(a) == vars(b) == vars(cfg) and a.layer_types is not cfg.layer_types


def copy_of_tensors(x, holder):
    return copy.deepcopy(holder)["w"] * x


def copy_after_write(x, cfg):
    cfg.decoder_scale = 3.0  # replayed after the graph: the real config is not yet changed
    return x * copy.deepcopy(cfg).decoder_scale


def test_what_a_deep_copy_cannot_capture_breaks_with_a_reason():
    x = torch.randn(3)
    report = explain(copy_of_tensors, x, {"w": torch.ones(3)})
    torch.testing.assert_close(report.result, x)
    assert any("deepcopy" in r["reason"] for r in report.break_reasons), report
    cfg = TinyConfig()
    report = explain(copy_after_write, x, cfg)
    torch.testing.assert_close(report.result, x * 3.0)
    assert report.graph_break_count >= 1, report
