"""The cache: per code object, guarded entries; recompile on miss; a recompile limit.

Owns: `FrameCache` (entries of one code object, its lock, its limit warning) and
the global table of caches, the sizes automatic dynamic makes symbolic, plus the
counters `refcomp.stats()` reports.  Must
not know how a frame is traced (it is handed a `compile` callback).  Spec:
spec/guards.md, "Cache and recompiles".

Lookups read a snapshot of the entry list without locking; a miss takes the
cache's lock, looks again (another thread may have compiled meanwhile) and
compiles at most once per set of facts.  Entries that name nn.Modules hold them
weakly: when a module dies, its entries are dropped.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections import Counter
from dataclasses import dataclass

import torch

from refcomp import logs
from refcomp.guards import TIME_EVERY
from refcomp.lookup import build_lookup
from refcomp.tracer.context import FLOAT, FLOAT_STATIC, VALUE

HISTORY_LIMIT = 100  # misses kept per frame (the oldest are dropped, and counted)

COUNTERS: Counter = Counter()
# What each counter of `refcomp.stats()["counters"]` counts: the one declaration, rendered
# into spec/runtime.md ("What is counted") and checked by tests/test_spec_tables.py.
COUNTER_MEANINGS: dict = {
    "calls": "calls of a compiled function or module, resume functions included",
    "compiled_calls": "calls that ran an entry (a graph, or a graph that breaks)",
    "eager_calls": "calls that ran eagerly: a whole-frame fallback, a stance, a full cache",
    "misses": "calls that matched no entry (the first call of each frame included)",
    "recompiles": "misses of a frame that already had an entry, which traced again",
    "graphs": "entries traced with a graph (resume functions included; a graph that ends"
              " in a break too; a symbolic trace retried with static sizes once)",
    "breaks": "entries that end in a graph break",
    "op_by_op_graphs": "graphs whose outputs require grad and whose backward cannot be"
                       " derived: run op by op on the eager backend (RB023)",
    "fallbacks": "entries that run their frame eagerly as a whole (with a reason id)",
    "limit_hits": "misses past `cache_size_limit` (the call runs eagerly)",
    "stance_eager": "misses run eagerly under `set_stance('eager_on_recompile')`",
    "unstable_guards": "fresh entries whose guards failed right after tracing (run eagerly)",
    "global_state_eager": "entries that run eagerly for global torch state (RB021)",
    "dynamic_specialized": "traces with symbolic sizes that failed and were kept static",
    "automatic_dynamic_dims": "argument dims automatic dynamic made symbolic",
    "automatic_dynamic_ints": "int arguments automatic dynamic made symbolic",
    "automatic_dynamic_floats": "float values (at any source) automatic dynamic made graph"
                                " inputs",
    "entries_freed": "entries dropped because a module they name was freed",
}
# Note [Per-call counters]: the counters every call bumps are a plain dict: an item
# update costs ~2.5x as much on a Counter (CPython specializes subscripts of exact
# dicts only).  `counters()` reports both as one.
# "past_limit": misses of a full cache (Note [Eager past the limit], refcomp/api.py),
# reported as misses, limit_hits and eager_calls.
CALLS: dict = {"calls": 0, "compiled_calls": 0, "eager_calls": 0, "past_limit": 0}
_CACHES: dict = {}  # (id of the code object, config key) -> FrameCache (which holds the code)
_CACHES_LOCK = threading.Lock()


@dataclass
class Miss:
    """One miss of a frame: each entry's failing guards (expected and actual), and what
    the call did about it (`outcome`: "recompiled", "eager: cache_size_limit"...)."""

    number: int  # the frame's miss count at this miss (1-based)
    failures: list  # [(entry index, [guards.Failure, ...])]
    outcome: str = ""

    def __str__(self):
        parts = [f"entry {i}: " + ("; ".join(str(f) for f in failed) or "(nothing named)")
                 for i, failed in self.failures]
        return f"miss {self.number} ({self.outcome}): " + " | ".join(parts)


class FrameCache:
    def __init__(self, code):
        self.code = code
        self._entries: list = []  # replaced, never mutated in place (lock-free readers)
        # The entries' checks as one function (Note [One lookup per cache]), built on the
        # first untimed lookup after the entries change; `checks` counts lookups.
        self.find = None
        self.checks = 0
        self.lock = threading.RLock()
        self.warned = False
        self.miss_reasons: list = []  # last miss: (entry index, [failing guard, expected])
        self.history: list = []  # Miss records, oldest first (at most HISTORY_LIMIT)
        self.misses = 0
        self.auto_dims: dict = {}  # source name -> dims whose size changed (dynamic=None)
        self.retired = False  # reset() dropped this cache: holders fetch a new one
        # The cache_size_limit the cache reached (Note [Eager past the limit] in
        # refcomp/api.py): a miss while it still holds that many entries runs eagerly
        # without being explained again.  None until then.  `at_limit` says whether it
        # holds that many now (read by every call that misses).
        self._full = None
        self.at_limit = False

    @property
    def full(self):
        return self._full

    @full.setter
    def full(self, limit) -> None:
        self._full = limit
        self.at_limit = limit is not None and len(self._entries) >= limit

    @property
    def entries(self) -> list:
        return self._entries

    @entries.setter
    def entries(self, entries: list) -> None:
        self._entries = entries
        self.at_limit = self._full is not None and len(entries) >= self._full
        self._drop_find()

    def _drop_find(self) -> None:
        find, self.find = self.find, None
        if find is not None:
            find.tally.retire()  # its uncounted checks: Note [Counts a lookup derives]

    def lookup(self, L, G, C, B, counted=False):
        """The entry whose guards pass, and its inputs, or (None, None); counts a hit.

        One lookup in TIME_EVERY (and the first after the entries change) checks entry
        by entry with timed checks (Note [Sampled guard time]); the others run the
        generated lookup of all entries (Note [One lookup per cache], refcomp/lookup.py).
        `counted`: the caller already counted this lookup in `checks` (dispatch, which
        inlines the fast path).
        """
        if not counted:
            self.checks += 1
        find = self.find
        if find is not None and self.checks % TIME_EVERY != 1:
            found = find(L, G, C, B)
            if found is None:
                return None, None
            found[0].hits += 1
            return found
        entries = self._entries
        if find is None and entries:
            self.find = build_lookup(entries)
            if self._entries is not entries:  # replaced meanwhile (another thread)
                self._drop_find()
        for entry in entries:
            guards = entry.guards
            guards._calls += 1
            inputs = guards.timed_check(L, G, C, B)
            if inputs is not None:
                entry.hits += 1
                return entry, inputs
        return None, None

    def add(self, entry) -> None:
        for obj in entry.refs_to_hold:
            if isinstance(obj, torch.nn.Module):
                entry.weakrefs.append(weakref.ref(obj, self._drop_callback(entry)))
            else:
                entry.refs.append(obj)
        entry.refs_to_hold = ()
        self.entries = self.entries + [entry]
        logs.new_entry(self, entry)  # REFCOMP_LOGS=guards,graph_breaks (a miss only)

    def _drop_callback(self, entry):
        me = weakref.ref(self)

        def drop(_ref):
            cache = me()
            if cache is not None:
                cache.entries = [e for e in cache.entries if e is not entry]
                COUNTERS["entries_freed"] += 1
        return drop

    def explain_miss(self, L, G, C, B) -> list:
        """Slow path: the failing guards of every entry, readable (counts each failure);
        the miss joins the frame's history (its outcome is set by the caller)."""
        failures = [(i, entry.guards.explain(L, G, C, B))
                    for i, entry in enumerate(self.entries)]
        self.miss_reasons = [(i, [f.expected for f in failed]) for i, failed in failures]
        self.misses += 1
        self.history.append(Miss(self.misses, failures))
        if len(self.history) > HISTORY_LIMIT:
            del self.history[0]
        return self.miss_reasons

    def grow_dynamic(self, L, G, C, B) -> None:
        """Automatic dynamic: remember each argument dim whose size alone made an entry miss,
        and each int argument whose value did, so the next compile traces them as symbols,
        and each float (at any source) whose value did, so the next compile reads it as a
        graph input (See Note [Automatic dynamic] in refcomp/api.py, Note [Number symbols]
        in refcomp/tracer/context.py, Note [Dynamic floats] in
        refcomp/tracer/dynamic_floats.py)."""
        grown = dict(self.auto_dims)
        for entry in self.entries:
            for name, dims in entry.guards.changed_sizes(L, G, C, B).items():
                old = grown.get(name, ())
                old = set(old) if isinstance(old, tuple) else set()  # (a number's before)
                new = set(dims) - old
                if new:
                    grown[name] = tuple(sorted(old | new))
                    COUNTERS["automatic_dynamic_dims"] += len(new)
            for name in _changed_ints(entry.guards.guards, L):
                if grown.get(name) != VALUE:
                    grown[name] = VALUE
                    COUNTERS["automatic_dynamic_ints"] += 1
            for name in _changed_floats(entry.guards.guards, L, G, C, B):
                mode = grown.get(name)  # (a float a trace needed the value of stays so)
                if mode != FLOAT and not (isinstance(mode, str) and
                                          mode.startswith(FLOAT_STATIC)):
                    grown[name] = FLOAT
                    COUNTERS["automatic_dynamic_floats"] += 1
        self.auto_dims = grown

    def warn_limit(self, limit: int) -> None:
        if self.warned:
            return
        self.warned = True
        warnings.warn(limit_message(self, limit), RuntimeWarning, stacklevel=4)


def _changed_ints(guards, L) -> list:
    """Argument names whose int value (guarded by EQUALS_MATCH) differs in this call."""
    from refcomp.guards import EQUALS_MATCH
    from refcomp.sources import LocalSource

    out = []
    for g in guards:
        if g.kind == EQUALS_MATCH and type(g.expected) is int and \
                isinstance(g.source, LocalSource) and \
                type(L.get(g.source.local)) is int and L[g.source.local] != g.expected:
            out.append(g.source.name())
    return out


def _changed_floats(guards, L, G, C, B) -> list:
    """Names of the sources whose float value (guarded by EQUALS_MATCH) is another float
    in this call (Note [Dynamic floats])."""
    from refcomp.guards import EQUALS_MATCH, _try_load
    from refcomp.sources import DerivedSource, IdentitySource

    out = []
    for g in guards:
        if g.kind == EQUALS_MATCH and type(g.expected) is float and g.source is not None \
                and not isinstance(g.source, (DerivedSource, IdentitySource)):
            actual = _try_load(g.source, L, G, C, B)
            if type(actual) is float and actual != g.expected:
                out.append(g.source.name())
    return out


def limit_message(cache: FrameCache, limit: int) -> str:
    """The cache_size_limit warning: the user's function and line, the guard that kept
    failing (expected and the latest actual value), and what would avoid the recompiles."""
    latest: dict = {}
    counts: Counter = Counter()
    for miss in cache.history:
        for _, failed in miss.failures:
            for f in failed:
                counts[f.expected] += 1
                latest[f.expected] = f
    code = cache.code
    text = (f"refcomp: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) hit"
            f" cache_size_limit={limit} after {cache.misses} miss(es); calls that match no"
            " entry now run eagerly.")
    if not counts:
        return text + f" Raise it with options={{'cache_size_limit': {2 * limit}}}."
    worst = latest[counts.most_common(1)[0][0]]
    return (f"{text} Guard that kept failing: {worst.expected} (last actual: {worst.actual})."
            f" {_suggestion(worst, limit)}")


def _suggestion(failure, limit: int) -> str:
    from refcomp.guards import EQUALS_MATCH, TENSOR_MATCH

    g = failure.guard
    raise_it = (f"or raise the limit with options={{'cache_size_limit': {2 * limit}}}, or"
                " refcomp.set_stance('eager_on_recompile')")
    if g is not None and g.kind == TENSOR_MATCH and ".shape[" in failure.expected:
        # An argument is named as the caller knows it: `x`, not `L['x']`.
        arg = getattr(g.source, "local", None) or "the tensor"
        dim = failure.expected.split(".shape[")[1].split("]")[0]
        return (f"Its size changes between calls: refcomp.mark_dynamic({arg}, {dim}) before"
                f" the call or compile with dynamic=True, {raise_it}.")
    if g is not None and g.kind == EQUALS_MATCH and isinstance(g.expected, (int, float)) \
            and not isinstance(g.expected, bool):
        return (f"{g.name} is a Python number baked into each graph: pass it as a tensor"
                f" (torch.tensor(...)) if its value changes between calls, {raise_it}.")
    return f"Keep that fact stable between calls, {raise_it}."


def cache_for(code, private=None, config: str = "") -> FrameCache:
    """The cache of `code` compiled with `config` (backend and options, see `config_key`).

    Two `refcomp.compile` wrappers of one function with different backends or options
    must not serve each other's entries, so the configuration is part of the key.
    """
    if private is not None:
        return private
    # By identity: code objects compare equal by content (co_filename aside), and two
    # modules made from one source must not share entries (a resume function built with
    # the first module's globals ran the second's frame: corpus pyfuzz_equal_code_objects).
    key = (id(code), config)
    cache = _CACHES.get(key)
    if cache is None:
        with _CACHES_LOCK:
            cache = _CACHES.setdefault(key, FrameCache(code))
    return cache


def config_key(backend, dynamic, fullgraph, options: dict) -> str:
    """A string naming everything that changes what a compile produces."""
    opts = sorted((name, repr(value)) for name, value in options.items())
    return repr((backend, dynamic, bool(fullgraph), opts))


def all_caches() -> dict:
    return dict(_CACHES)


def counters() -> dict:
    """COUNTERS and the per-call counts (See Note [Per-call counters]), those not zero."""
    out = dict(COUNTERS)
    for k, n in CALLS.items():
        if n and k != "past_limit":
            out[k] = out.get(k, 0) + n
    if CALLS["past_limit"]:
        for k in ("misses", "limit_hits", "eager_calls"):
            out[k] = out.get(k, 0) + CALLS["past_limit"]
    return out


def reset() -> None:
    with _CACHES_LOCK:
        for cache in _CACHES.values():
            cache.retired = True
        _CACHES.clear()
    COUNTERS.clear()
    for k in CALLS:
        CALLS[k] = 0
