"""The public surface: compile, explain, reset, disable, mark_dynamic, stats.

Owns: `compile` (functions, methods and nn.Modules; lazy: the first call traces),
the call path (bind arguments -> guarded cache lookup -> run, or trace and add
an entry, or run eagerly), automatic dynamic on a miss, `OptimizedModule`,
`disable`, `mark_dynamic`, `reset` and `stats`.
Spec: spec/tracer.md ("Using refcomp.compile") and spec/guards.md.
"""

from __future__ import annotations

import functools
import inspect
import time
import types
import warnings

import torch

import codegen.stats as codegen_stats
from codegen.backends import get_backend
from refcomp import cache as cache_mod
from refcomp import distributed, global_state, logs, resume, stance
from refcomp.break_trace import build_whole
from refcomp.cache import CALLS, COUNTERS, FrameCache, cache_for, config_key
from refcomp.config import resolve_options
from refcomp.guards import SHAPE_ENV, TIME_EVERY
from refcomp.reasons import (
    INTERNAL_ERROR,
    NON_TENSOR_RESULT,
    UNMODELLED_TORCH_STATE,
    CaptureError,
    Unsupported,
)
from refcomp.recipes import Refused
from refcomp.runtime import RerunEagerly, fallback_entry
from refcomp.stance import FORCE_EAGER, RecompileError
from refcomp.tracer.context import FLOAT, FLOAT_STATIC, MARK_ATTR, STATIC_ATTR, TraceContext
from refcomp.tracer.dynamic_floats import PinFloat
from refcomp.tracer.frame import check_code_supported, trace
from refcomp.tracer.modules import MODULE_TABLE, overrides_call

_DISABLED = "_refcomp_disabled"
# Whether refcomp.disable was ever called: until then a call skips reading the flag
# (a getattr with a default is ~0.5% of a tiny function's eager time: Note [The call path]).
_ANY_DISABLED = [False]


def compile(fn_or_module=None, *, backend=None, dynamic=None, fullgraph=False, options=None):
    """Compile a function or nn.Module; usable as `@compile` or `@compile(backend=...)`."""
    if fn_or_module is None:
        return lambda f: compile(f, backend=backend, dynamic=dynamic, fullgraph=fullgraph,
                                 options=options)
    if backend is not None:
        get_backend(backend)  # unknown backend: ValueError listing the valid ones now
    opts = resolve_options(options, backend)
    if not isinstance(fullgraph, bool):
        raise ValueError(f"fullgraph must be True or False, got {fullgraph!r}")
    if dynamic not in (None, False, True):
        raise ValueError(f"dynamic must be None, False or True, got {dynamic!r}")
    if isinstance(fn_or_module, torch.nn.Module):
        return OptimizedModule(fn_or_module, backend, fullgraph, opts, dynamic=dynamic)
    if not callable(fn_or_module):
        raise TypeError(f"refcomp.compile expects a function or nn.Module, got"
                        f" {type(fn_or_module).__name__}")
    return CompiledFunction(as_function(fn_or_module), backend, fullgraph, opts,
                            dynamic=dynamic)


def as_function(fn):
    """A Python function or method as it is; any other callable through a shim."""
    if inspect.isfunction(fn) or inspect.ismethod(fn) and inspect.isfunction(fn.__func__):
        return fn
    return callable_shim(fn)


class _Unique:
    """A constant no other code object holds (see callable_shim)."""


def callable_shim(target):
    """A Python function that calls `target`.

    Note [Callable shims]: refcomp compiles bytecode, so `refcomp.compile` of a
    `functools.partial`, a callable object or a C function (`F.gelu`, `torch.sin`) compiles
    this two-line frame, and the
    tracer follows the call into the target as it follows any call: a partial's func,
    args and keywords and a callable object's `__call__` are read (and guarded) like
    arguments; a C function goes through the torch table.  Each shim gets a code object
    of its own (caches are per code object), named after its target.
    """
    def shim(*args, **kwargs):
        return target(*args, **kwargs)

    inner = target.func if isinstance(target, functools.partial) else target
    name = getattr(inner, "__name__", None) or type(inner).__name__
    code = shim.__code__.replace(co_name=name, co_qualname=name,
                                 co_consts=shim.__code__.co_consts + (_Unique(),))
    fn = types.FunctionType(code, shim.__globals__, name, None, shim.__closure__)
    return fn


def mark_dynamic(t: torch.Tensor, dim) -> None:
    """Trace dim `dim` (an int or a list of ints) of argument tensor `t` as a size symbol.

    Like torch._dynamo.mark_dynamic; spec/guards.md, "Dynamic sizes".  A dim that cannot be
    symbolic (size 0 or 1, a non-contiguous tensor, a use that needs a number) stays static,
    with a note in the entry and in explain().
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mark_dynamic expects a torch.Tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise IndexError(f"mark_dynamic: dim {d!r} out of range for a {t.dim()}-d tensor")
    setattr(t, MARK_ATTR, set(getattr(t, MARK_ATTR, ())) | {d % t.dim() for d in dims})


# Note [Specialised dims]: a trace with symbolic sizes can fail on a relation the IR
# needs between a symbol and a number or another symbol (a matmul's contraction s1 vs a
# weight's 32, broadcasting s1 against 64).  Torch guards the relation and specialises;
# refcomp retraces with the dims of exactly the symbols the failure names kept static
# (their TENSOR_MATCH pins the size, i.e. guards `s1 == 32`), at most _SPECIALISE_TRIES
# traces, and says so in the entry's notes.  The other dims stay symbolic.
_SPECIALISE_TRIES = 4


def _pin_failed_symbols(ctx, err, pinned: dict) -> bool:
    """Record the (source, dim)s of the size symbols named in `err` as static; False if
    it names none (the failure is not about symbolic sizes)."""
    import re

    lines = str(err).splitlines()
    if not lines:  # a failure without a message (a bare assert) names no symbol
        return False
    text = lines[0].split(" at /")[0]
    by_name = {str(sym): uses for sym, uses in ctx.sym_sources.items()}
    named = [n for n in re.findall(r"\bs\d+\b", text) if n in by_name]
    if not named:
        return False
    # One symbol per retry, the last one named: in `f32[s0,s1] @ f32[32,64]` the
    # failing relation is on the inner dims, so s0 is tried only if pinning s1 fails.
    for source, d in by_name[named[-1]]:
        pinned.setdefault(source.name(), {})[d] = text
    return True


def _pin_floats(floats, names, why: str, pinned: dict, auto_dims: dict) -> bool:
    """Record the dynamic floats `names` (of `floats`, the frame's) as static for the next
    trace, and in the frame's `auto_dims` for every later compile (a use that needed the
    value will need it again: one trace per value, not two); False if each is already
    (Note [Dynamic floats])."""
    new = False
    for name in names:
        if name in floats and FLOAT not in pinned.get(name, {}):
            why = why.splitlines()[0] if why else why
            pinned.setdefault(name, {})[FLOAT] = why
            auto_dims[name] = f"{FLOAT_STATIC}: {why}"
            new = True
    return new


def _pinning_floats(floats, pinned: dict, auto_dims: dict, make):
    """`make()`, traced again with the floats a PinFloat names static until none does
    (Note [Dynamic floats]); the last try has every float static."""
    for _ in range(len(floats)):
        try:
            return make()
        except PinFloat as p:
            if not _pin_floats(floats, p.roots or floats, p.why, pinned, auto_dims):
                break
    _pin_floats(floats, floats, "a break needed its value", pinned, auto_dims)
    return make()


def maybe_mark_dynamic(t: torch.Tensor, dim) -> None:
    """Like torch._dynamo.maybe_mark_dynamic: a hint to trace `dim` symbolically.

    refcomp's `mark_dynamic` is already a hint (a dim that cannot be symbolic stays static
    with a note, never an error), so the two do the same."""
    mark_dynamic(t, dim)


def mark_static(t: torch.Tensor, dim) -> None:
    """Keep dim `dim` (an int or a list of ints) of argument tensor `t` static in every mode
    (dynamic=True, automatic dynamic, marks); like torch._dynamo.mark_static.  The entry's
    notes say which requested dims it kept static."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise IndexError(f"mark_static: dim {d!r} out of range for a {t.dim()}-d tensor")
    setattr(t, STATIC_ATTR, set(getattr(t, STATIC_ATTR, ())) | {d % t.dim() for d in dims})


class CompiledFunction:
    """A function whose calls go through the guarded cache of its code object."""

    def __init__(self, fn, backend, fullgraph, options, private_cache=False, dynamic=False,
                 per_function=False):
        bound_self = None
        if inspect.ismethod(fn):
            bound_self, fn = fn.__self__, fn.__func__
        if not inspect.isfunction(fn):
            raise TypeError(f"refcomp.compile cannot compile {fn!r}: not a Python function")
        self.fn = fn
        self.bound_self = bound_self
        self.backend = backend
        self.fullgraph = fullgraph
        self.options = options
        self.dynamic = dynamic  # None: automatic dynamic (See Note [Automatic dynamic])
        self.code = fn.__code__
        # The wrapper's own parameters, not `__wrapped__`'s: the code that runs is the wrapper's.
        self._read_signature()
        self.arg_names = self.code.co_varnames[:self.code.co_argcount]
        self.simple = not (self.code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
                           or self.code.co_kwonlyargcount)
        self.n_positional = len(self.arg_names) if self.simple else -1
        self.binder = _binder(self.arg_names)
        # `def f(*args, **kwargs)` (a shim, a decorator's wrapper): bound without inspect.
        self.star_only = None
        if not self.arg_names and not self.code.co_kwonlyargcount and \
                self.code.co_flags & inspect.CO_VARARGS and \
                self.code.co_flags & inspect.CO_VARKEYWORDS:
            self.star_only = self.code.co_varnames[:2]
        self.builtins = fn.__globals__.get("__builtins__", __builtins__)
        if not isinstance(self.builtins, dict):
            self.builtins = self.builtins.__dict__
        self.env = (fn.__globals__, fn.__closure__, self.builtins)  # G, C, B: read-only
        self.private = FrameCache(self.code) if private_cache else None
        self.config = config_key(backend, dynamic, fullgraph, options)
        # Note [One cache per decorated function] (refcomp/resume.py): this function's
        # entries are its own, not shared with the other closures of its code.
        self.per_function = per_function
        if per_function:
            self.config += f" for the function at {id(fn):#x}"
        self._cache = None  # cache_for(...), kept until reset() retires it
        self._root_cache = None  # a resume function's: the cache of the frame it continues
        self.resume_of = None  # the ResumeFunction this compiles, if any
        self.opaque: frozenset = frozenset()  # Note [Opaque numbers] (resume functions)
        self.last_entry = None
        # The function's own attributes show through, but never over this object's: a
        # singledispatch function's `dispatch` (its __dict__) replaced this class's
        # `dispatch` method, so every call raised a TypeError eager never raises.
        functools.update_wrapper(self, fn, updated=())
        for name, value in vars(fn).items():
            if not hasattr(type(self), name) and name not in vars(self):
                setattr(self, name, value)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def _read_signature(self):
        """The signature that binds a call, with the defaults the function holds now."""
        fn = self.fn
        self.signature = inspect.signature(fn, follow_wrapped=False)
        self._defaults = fn.__defaults__
        self._kwdefaults = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else fn.__kwdefaults__

    def _bind(self, args, kwargs) -> dict:
        fn = self.fn
        if fn.__defaults__ is not self._defaults or fn.__kwdefaults__ != self._kwdefaults:
            # `f.__defaults__ = ...` after compiling: a Signature keeps the values it saw.
            self._read_signature()
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def __call__(self, *args, **kwargs):
        # Every call pays this path: see Note [Per-call counters] (cache.py), Note [Guarded
        # inputs] (codegen/runtime.py) and Note [The call path] for what it leaves out.
        if self.bound_self is not None:
            args = (self.bound_self,) + args
        fn = self.fn
        if FORCE_EAGER[0] or _ANY_DISABLED[0] and getattr(fn, _DISABLED, False):
            return fn(*args, **kwargs)
        if self.star_only is not None:
            L = {self.star_only[0]: args, self.star_only[1]: kwargs}
        elif kwargs or len(args) != self.n_positional:
            L = self._bind(args, kwargs)
        else:
            L = self.binder(*args)
        # Note [The call path]: `dispatch`'s common cases, inlined (a Python call and its
        # five arguments are ~5% of a tiny function's eager time): the generated lookup
        # answers (not a timed check), and it found an entry or the cache is full.
        cache = self._cache
        if cache is not None and not cache.retired:
            find = cache.find
            checks = cache.checks + 1
            if find is not None and checks % TIME_EVERY != 1:
                cache.checks = checks
                CALLS["calls"] += 1
                G, C, B = self.env
                found = find(L, G, C, B)
                if found is not None:
                    entry, inputs = found
                    entry.hits += 1
                    if entry.graph is not None and entry.resume is None:  # as in _run
                        self.last_entry = entry
                        CALLS["compiled_calls"] += 1
                        if entry.lone is not None:
                            return entry.fn(*inputs)[entry.lone]
                        try:
                            return entry.run(inputs)
                        except RerunEagerly:  # Note [Raising branches]
                            return fn(*args, **kwargs)
                    return self._run(entry, inputs, L, G, C, B, fn, args, kwargs)
                if cache.at_limit and stance._STANCE[0] != "fail_on_recompile":
                    CALLS["past_limit"] += 1  # Note [Eager past the limit]
                    return fn(*args, **kwargs) if kwargs else fn(*args)
                return self._run(*self._on_miss(cache, L, G, C, B, fn),
                                 L, G, C, B, fn, args, kwargs)
        return self.dispatch(fn, args, kwargs, L, self.env[1])

    def dispatch(self, fn, args, kwargs, L, C):
        """Run the cache entry whose guards pass on (L, C), compiling one on a miss."""
        G, _, B = self.env
        cache = self._cache
        if cache is None or cache.retired:
            cache = self._cache = cache_for(self.code, self.private, self.config)
        CALLS["calls"] += 1
        cache.checks += 1  # FrameCache.lookup's fast path, inlined: ~0.1 us a call
        find = cache.find
        if find is not None and cache.checks % TIME_EVERY != 1:
            found = find(L, G, C, B)
            if found is None:
                entry = None
            else:
                entry, inputs = found
                entry.hits += 1
        else:
            entry, inputs = cache.lookup(L, G, C, B, counted=True)
        if entry is None and cache.at_limit and stance.current() != "fail_on_recompile":
            # Note [Eager past the limit]: the miss was explained, logged and warned about
            # once, when the cache filled up; every later miss costs the lookup above plus
            # the original function, nothing else.
            CALLS["past_limit"] += 1  # a plain dict: Note [Per-call counters]
            # An empty **{} still copies a dict and takes the slow call path (~0.5 us).
            return fn(*args, **kwargs) if kwargs else fn(*args)
        if entry is None:
            entry, inputs = self._on_miss(cache, L, G, C, B, fn)
        return self._run(entry, inputs, L, G, C, B, fn, args, kwargs)

    def _on_miss(self, cache, L, G, C, B, fn):
        with cache.lock:
            entry, inputs = cache.lookup(L, G, C, B)  # another thread may have added it
            if entry is None:
                entry, inputs = self._miss(cache, L, G, C, B, fn)
        return entry, inputs

    def _run(self, entry, inputs, L, G, C, B, fn, args, kwargs):
        """Run what the lookup found: a graph, a graph that breaks, or (None) eagerly."""
        self.last_entry = entry
        try:
            if entry is not None and entry.resume is not None:  # a break: spec/runtime.md
                CALLS["compiled_calls"] += 1
                return resume.run_break(entry, inputs, L, G, C, B, self)
            if entry is not None and entry.graph is not None:
                CALLS["compiled_calls"] += 1
                if entry.lone is not None:
                    return entry.fn(*inputs)[entry.lone]
                return entry.run(inputs)
        except RerunEagerly:  # Note [Raising branches] (refcomp/tracer/raise_checks.py)
            pass
        CALLS["eager_calls"] += 1
        return fn(*args, **kwargs) if kwargs else fn(*args)

    def _miss(self, cache, L, G, C, B, fn):
        COUNTERS["misses"] += 1
        limit = self.options["cache_size_limit"]
        if self.resume_of is not None and cache.entries:
            resume.widen(self, cache, L)  # Note [Opaque numbers]
        if cache.entries:
            cache.explain_miss(L, G, C, B)
            miss = cache.history[-1]
            now = stance.current()
            if now == "fail_on_recompile":
                miss.outcome = "error: set_stance('fail_on_recompile')"
                raise RecompileError(f"refcomp: {self.code.co_name} ({self.code.co_filename}:"
                                     f"{self.code.co_firstlineno}) would recompile under"
                                     f" set_stance('fail_on_recompile'): {miss}")
            if now == "eager_on_recompile":
                miss.outcome = "eager: set_stance('eager_on_recompile')"
                COUNTERS["stance_eager"] += 1
                return None, None
            miss.outcome = "eager: cache_size_limit" if len(cache.entries) >= limit \
                else "recompiled"
            if self.dynamic is None:
                cache.grow_dynamic(L, G, C, B)
        logs.recompile(cache, limit)  # REFCOMP_LOGS=recompiles: failed guards, limit hits
        if len(cache.entries) >= limit:
            cache.warn_limit(limit)
            cache.full = limit  # later misses take the fast path in dispatch
            COUNTERS["limit_hits"] += 1
            return None, None
        if cache.entries:
            COUNTERS["recompiles"] += 1
        entry = self._compile(L, cache.auto_dims, fn)
        inputs = entry.guards.check(L, G, C, B)
        if inputs is None:
            # A fact that changed between tracing and checking (a property returning a new
            # object each time...): the entry could never hit, so run eagerly, say why.
            warnings.warn(f"refcomp: {self.code.co_name}: guards fail right after tracing"
                          f" ({'; '.join(entry.guards.failures(L, G, C, B))}); running"
                          " eagerly", RuntimeWarning, stacklevel=4)
            COUNTERS["unstable_guards"] += 1
            return None, None
        cache.add(entry)
        return entry, inputs

    def _compile(self, L, auto_dims=None, fn=None):
        """`_build_entry`, with the seconds of each compile stage kept on the entry
        (`stage_times`: codegen.stats.STAGES)."""
        with codegen_stats.collecting() as times, codegen_stats.gc_paused():
            entry = self._build_entry(L, auto_dims, fn)
        entry.stage_times = times
        return entry

    def _build_entry(self, L, auto_dims=None, fn=None):
        """Trace and build an entry (a graph, a graph that breaks, or an eager fallback).

        Note [Automatic dynamic]: with dynamic=None a miss whose failing guard is only a
        changed size of an argument tensor's dim (`FrameCache.grow_dynamic`) makes that
        dim symbolic in every later compile of the frame, so a third size hits the second
        entry.  A trace that fails with marked or automatic symbols is retried with every
        size static; when that succeeds the entry is specialized and its notes say why.
        """
        fn = fn or self.fn
        start = time.perf_counter()
        state = global_state.snapshot()
        why = global_state.eager_reason(state)
        if why is not None:  # See Note [Global state]: run eagerly, guarded by the state
            ctx = TraceContext(self.code.co_name, dynamic=bool(self.dynamic))
            reason = Unsupported(UNMODELLED_TORCH_STATE, why)
            reason.locate(self.code.co_filename, self.code.co_firstlineno, "<frame>")
            COUNTERS["global_state_eager"] += 1
            entry = fallback_entry(ctx, reason, self._filter(list(ctx.guards.values())))
            entry.compile_time_s = time.perf_counter() - start
            return entry
        pinned: dict = {}
        # Note [Dynamic floats]: the sources read as dynamic floats, each pinned static
        # for the next try when a trace needs its value (PinFloat), or fails otherwise.
        floats = [k for k, v in (auto_dims or {}).items() if v == FLOAT]
        for _ in range(_SPECIALISE_TRIES + len(floats)):
            ctx = TraceContext(self.code.co_name, dynamic=bool(self.dynamic),
                               auto_dims=auto_dims, pinned=pinned)
            try:
                if self.resume_of is not None:  # a resume function: spec/runtime.md
                    check_code_supported(self.code)
                    try:
                        return resume.compile_break(self, fn, L, opaque=self.opaque,
                                                    auto_dims=auto_dims, pinned=pinned)
                    except Refused as refused:
                        raise Unsupported(NON_TENSOR_RESULT, f"at a graph break: {refused}") \
                            from refused
                entry = self._trace(ctx, L, fn)
                err = None
                if any(kind != FLOAT for d in pinned.values() for kind in d):  # a size
                    COUNTERS["dynamic_specialized"] += 1
                break
            except PinFloat as p:  # a use that needs a dynamic float's value
                err = p
                if not _pin_floats(floats, p.roots or floats, p.why, pinned, auto_dims):
                    break
            except Exception as e:
                err = e
                # a failure that is not a break (a break splits the frame below, where a
                # use that needs the float's value raises PinFloat)
                if not isinstance(e, Unsupported) and _pin_floats(
                        floats, ctx.dynamic_floats if self.resume_of is None else floats,
                        f"the trace with it a graph input failed ({type(e).__name__}: {e})",
                        pinned, auto_dims):
                    continue
                if self.resume_of is not None or not _pin_failed_symbols(ctx, e, pinned):
                    break
        if err is not None:
            reason = err if isinstance(err, Unsupported) else Unsupported(
                INTERNAL_ERROR, f"{type(err).__name__}: {err}")
            if not isinstance(err, Unsupported):
                reason.__cause__ = err
                reason.locate(self.code.co_filename, self.code.co_firstlineno, "<frame>")
            # Sizes the user asked to be dynamic fall back to a static trace when the
            # symbolic one fails; automatic ones do not: a size that changed once changes
            # again (a KV cache's length at every decoding step), so a static entry would
            # recompile per size up to the limit, where a break keeps it symbolic.
            if ctx.requested_explicit:
                entry = self._static_retry(L, reason, start, fn)
                if entry is not None:
                    return entry
            if self.fullgraph:
                raise CaptureError(reason) from err
            if self.resume_of is None:
                try:
                    entry = _pinning_floats(floats, pinned, auto_dims, lambda: resume.compile_break(
                        self, fn, L, auto_dims=auto_dims, pinned=pinned))
                    static = tuple(f"automatic dynamic: {k} is a graph input" for k, d in
                                   pinned.items() if FLOAT in d)  # (the first try's)
                    entry.notes[:0] = [n for n in ctx.notes if n not in entry.notes and
                                       not n.startswith(static)]
                    return entry  # split at the break, resumed after it (spec/runtime.md)
                except Exception as split:  # Refused, Unsupported before any instruction
                    # the whole frame runs eagerly, with the first trace's reason
                    ctx.notes.append(f"whole frame in eager: not split at the break"
                                     f" ({type(split).__name__}: {split})")
            COUNTERS["fallbacks"] += 1
            entry = fallback_entry(ctx, reason, self._filter(list(ctx.guards.values())))
        entry.notes[:0] = ctx.notes
        entry.refs_to_hold = tuple(ctx.id_objects)
        entry.compile_time_s = time.perf_counter() - start
        return entry

    def _trace(self, ctx, L, fn=None):
        check_code_supported(self.code)
        if self.fn is call_module:  # OptimizedModule.forward checks mod.forward per call
            ctx.checked_by_caller.add(("L['self']", "forward"))
        with codegen_stats.stage("trace"):
            result = trace(fn or self.fn, L, ctx)
        guards = self._filter(ctx.finish_guards())
        entry = build_whole(self, ctx, result.output, guards)
        COUNTERS["graphs"] += 1
        return entry

    def _static_retry(self, L, reason, start, fn=None):
        """The entry of a trace with marked and automatic dims static, or None if it fails
        too (then the failure was not the sizes')."""
        ctx = TraceContext(self.code.co_name, dynamic=False, static=True)
        try:
            entry = self._trace(ctx, L, fn)
        except Exception:
            return None
        COUNTERS["dynamic_specialized"] += 1
        entry.notes[:0] = ctx.notes + [f"dynamic: sizes kept static, as the trace with"
                                       f" symbolic sizes failed: {reason.message()}"]
        entry.refs_to_hold = tuple(ctx.id_objects)
        entry.compile_time_s = time.perf_counter() - start
        return entry

    def _filter(self, guards):
        keep_fn = self.options["guard_filter_fn"]
        if keep_fn is None:
            return guards
        keep = keep_fn(guards)
        if not isinstance(keep, (list, tuple)):
            raise TypeError(f"options['guard_filter_fn'] must return a list of bools, one per"
                            f" guard, got {type(keep).__name__}")
        if len(keep) != len(guards):
            raise ValueError(f"guard_filter_fn returned {len(keep)} flags for"
                             f" {len(guards)} guards")
        return [g for g, k in zip(guards, keep) if k]

    @property
    def cache(self) -> FrameCache:
        return cache_for(self.code, self.private, self.config)

    @property
    def root_cache(self) -> FrameCache:
        """Where resume functions and compiled callees of this frame are kept."""
        return self._root_cache if self._root_cache is not None else self.cache


def _binder(names: tuple):
    """`bind(*args) -> {name: arg}` for exactly `names`: a generated dict display, ~2.5x
    faster than dict(zip(names, args)).  Names are closure constants, never source
    text (Note [Names are data], spec/guards.md)."""
    keys = [f"k{i}" for i in range(len(names))]
    params = [f"a{i}" for i in range(len(names))]
    pairs = ", ".join(f"{k}: {a}" for k, a in zip(keys, params))
    text = (f"def make({', '.join(keys)}):\n    def bind({', '.join(params)}):\n"
            f"        return {{{pairs}}}\n    return bind\n")
    namespace: dict = {}
    exec(text, namespace)
    return namespace["make"](*names)


class OptimizedModule(torch.nn.Module):
    """The compiled wrapper of an nn.Module: same parameters, state_dict and modes."""

    def __init__(self, mod: torch.nn.Module, backend, fullgraph, options, private=False,
                 dynamic=False):
        super().__init__()
        self._orig_mod = mod
        # A torch.nn module that the module table maps (Linear, MultiheadAttention...) is
        # entered through a call, so the table handles it instead of torch's forward code.
        self._private = private
        self._compiled_forward = CompiledFunction(_class_forward(mod), backend, fullgraph,
                                                  options, private_cache=private,
                                                  dynamic=dynamic)

    def forward(self, *args, **kwargs):
        mod = self._orig_mod
        if mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks or \
                mod._backward_pre_hooks:
            if distributed.has_distributed_hooks(mod):  # FSDP2's: eager, forward compiled
                return distributed.call_with_forward(
                    mod, functools.partial(self._serve(self._compiled_forward), mod), args,
                    kwargs)
            # the call, hooks included, traced (Note [Forward hooks traced]); a backward
            # hook breaks there with its reason and runs eagerly
            return self._serve(self._compiled_call())(mod, *args, **kwargs)
        override = mod.__dict__.get("forward")
        if override is not None and inspect.isfunction(getattr(override, "__func__", override)):
            # an instance-level forward: what mod(...) would run
            return self._serve(self._compile_override(override))(*args, **kwargs)
        if override is not None:  # not Python (a ScriptMethod): the call, traced, says why
            return self._serve(self._compiled_call())(mod, *args, **kwargs)
        # What the class makes mod(...) run, decided once per (class, its __call__, its
        # forward): every call pays only these three reads, not the decision.
        cls = type(mod)
        call, forward = cls.__call__, getattr(cls, "forward", None)
        seen = self.__dict__.get("_class_seen")
        if seen is None or seen[0] is not cls or seen[1] is not call or seen[2] is not forward:
            seen = self.__dict__["_class_seen"] = (cls, call, forward, overrides_call(cls),
                                                   _class_forward(mod),
                                                   distributed.ddp_inner(mod) is not None)
        if seen[5]:  # DDP: its forward eager, the module it wraps compiled
            return self._call_ddp(mod, args, kwargs)
        if seen[3]:  # the class overrides __call__: mod(...) runs it
            return self._serve(self._compile_override(call))(mod, *args, **kwargs)
        compiled = self._compiled_forward
        if compiled.fn is not seen[4]:
            # `Cls.forward = f` after compiling, or `mod.__class__ = Other`: mod(...) now
            # runs another forward, compiled as a new frame (spec/guards.md).
            compiled = self._compiled_forward = CompiledFunction(
                seen[4], compiled.backend, compiled.fullgraph, compiled.options,
                private_cache=self._private, dynamic=compiled.dynamic)
        return compiled(mod, *args, **kwargs)

    def _call_ddp(self, ddp, args, kwargs):
        inner = distributed.ddp_inner(ddp)
        held = self.__dict__.get("_inner")
        if held is None or held._orig_mod is not inner:
            cf = self._compiled_forward
            held = self.__dict__["_inner"] = OptimizedModule(
                inner, cf.backend, cf.fullgraph, cf.options, self._private, cf.dynamic)
        try:
            return distributed.call_with_inner(ddp, held, args, kwargs)
        finally:
            self._serve(held.__dict__.get("_served", held._compiled_forward))

    def _serve(self, compiled):
        """`compiled` serves this call instead of the class forward's CompiledFunction:
        explain() reads the entries of the one that served the last call."""
        self.__dict__["_served"] = compiled
        return compiled

    def _compiled_call(self):
        """A CompiledFunction of `mod(...)` itself (call_module), made on first use."""
        held = self.__dict__.get("_call")
        if held is None:
            cf = self._compiled_forward
            held = self.__dict__["_call"] = CompiledFunction(
                call_module, cf.backend, cf.fullgraph, cf.options, private_cache=self._private,
                dynamic=cf.dynamic)
        return held

    def _compile_override(self, override):
        """A CompiledFunction of an instance-level `forward` (one per function object);
        a callable that is not a Python function runs as it is."""
        held = self.__dict__.get("_override")
        if held is None or held[0] is not override:
            cf = self._compiled_forward
            try:
                compiled = CompiledFunction(override, cf.backend, cf.fullgraph, cf.options,
                                            dynamic=cf.dynamic)
            except TypeError:
                compiled = override
            held = self.__dict__["_override"] = (override, compiled)
        return held[1]

    def __reduce_ex__(self, protocol):
        """copy.deepcopy, pickle and torch.save keep the module and how it is compiled; the
        copy compiles afresh on its first call (compiled code is not data)."""
        cf = self._compiled_forward
        return (_optimized_module, (self._orig_mod, cf.backend, cf.fullgraph, cf.options,
                                    self._private, cf.dynamic))

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def _optimized_module(mod, backend, fullgraph, options, private, dynamic):
    """An unpickled or copied OptimizedModule (See OptimizedModule.__reduce_ex__)."""
    return OptimizedModule(mod, backend, fullgraph, options, private, dynamic)


def _class_forward(mod):
    """What the compiled frame of `mod` runs: its class's forward, or a call of the module
    for a torch.nn module the module table maps (Linear, MultiheadAttention...) and for a
    forward that is not a Python function (TorchScript's)."""
    forward = inspect.getattr_static(type(mod), "forward", None)
    if type(mod) in MODULE_TABLE or not inspect.isfunction(forward):
        return call_module  # (a TorchScript module's forward: the call says why it breaks)
    return forward


def call_module(self, *args, **kwargs):
    """The frame compiled for a built-in module: one call, resolved by the module table."""
    return self(*args, **kwargs)


def disable(fn):
    """Keep `fn` eager: compiling it runs it as is, and tracing into it falls back."""
    setattr(fn, _DISABLED, True)
    _ANY_DISABLED[0] = True
    return fn


def reset() -> None:
    """Forget every compiled entry and counter (the frontend's and codegen's)."""
    cache_mod.reset()
    codegen_stats.reset()


def stats() -> dict:
    """Counters plus, per cached code object, each entry's hits, guard time and failures."""
    frames, recompiles = {}, {}
    for cache in cache_mod.all_caches().values():
        code = cache.code
        name = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        while name in frames:  # the same function compiled with another configuration
            name += "'"
        frames[name] = [entry_stats(e) for e in cache.entries]
        if cache.history:
            recompiles[name] = [str(m) for m in cache.history]
    # Kernels, extern calls and fallbacks are counted where they happen, in codegen/.
    return {"counters": cache_mod.counters(), "codegen": codegen_stats.snapshot(),
            "frames": frames, "recompiles": recompiles}


def entry_stats(e) -> dict:
    gs = e.guards
    return {"compiled": e.graph is not None, "backend": e.backend, "hits": e.hits,
            "guard_checks": gs.calls,
            "guard_time_us_per_check": (gs.time_ns / gs.timed / 1e3) if gs.timed else 0.0,
            "guard_failures": {g.describe(): g.failures for g in gs.guards if g.failures},
            "reason": e.reason.message() if e.reason is not None else None,
            "symbolic_inputs": [str(v.type) for v in e.graph.inputs if not v.type.is_static]
            if e.graph is not None else [],
            "symbols": entry_symbols(e),
            # the size symbols' guards (duck sizing, decisions, specialisations), readable
            "shape_guards": [g.describe() for g in gs.guards if g.kind == SHAPE_ENV],
            "notes": list(e.notes), "guard_profile": gs.profile(),
            "compile_time_s": e.compile_time_s, "stage_times": dict(e.stage_times),
            "training": training_stats(e.training)}


def entry_symbols(e) -> dict:
    """{size symbol: where each call reads it}: `L['x'].size(0)`, or `L['n']` for an int
    argument (Note [Number symbols]); why each is a symbol is in the entry's notes."""
    from ir.types import is_symbolic
    from refcomp.sources import size_text

    out: dict = {}
    if e.graph is None or len(e.graph.inputs) != len(e.guards.input_sources):
        return out
    for v, src in zip(e.graph.inputs, e.guards.input_sources):
        for d, n in enumerate(v.type.shape):
            if is_symbolic(n) and n.is_Symbol and str(n) not in out:
                out[str(n)] = size_text(src, d)
    return out


def guard_profile() -> str:
    """Per guard of every cached entry: checks, failures and sampled time, as a table.

    `print(refcomp.guard_profile())`; the same rows are each entry's "guard_profile" in
    `stats()`.  See Note [Guard profile] (spec/guards.md) for what is exact (checks,
    failures) and what is sampled (time).
    """
    lines = []
    for frame, entries in stats()["frames"].items():
        for i, e in enumerate(entries):
            lines.append(f"{frame} entry {i}: {e['guard_checks']} checks, {e['hits']} hits")
            lines.append(f"  {'checks':>8} {'fails':>6} {'us':>7}  kind: guard")
            for row in e["guard_profile"]:
                lines.append(f"  {row['checks']:>8} {row['failures']:>6}"
                             f" {row['time_us']:>7.3f}  {row['kind']}: {row['guard']}")
    return "\n".join(lines) if lines else "(no compiled entries)"


def training_stats(record) -> dict | None:
    """A compiled forward + backward (refcomp/autograd.py): ops, kernels, saved tensors."""
    if record is None:
        return None
    return {"forward_ops": record.forward_ops, "backward_ops": record.backward_ops,
            "forward_kernels": record.forward_kernels,
            "backward_kernels": record.backward_kernels,  # None: not compiled yet
            "saved_tensors": record.saved, "saved_bytes": record.saved_bytes,
            "recomputed_ops": record.recomputed, "backward_calls": record.backward_calls,
            "backward_compile_s": record.backward_compile_s,
            "backward_stage_times": dict(record.backward_stage_times)}
