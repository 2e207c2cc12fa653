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

import torch

from refcomp import logs
from refcomp.guards import TIME_EVERY

COUNTERS: Counter = Counter()
# Note [Per-call counters]: the counters every call bumps are a plain dict: an item
# update costs ~2.5x as much on a Counter (CPython specializes subscripts of exact
# dicts only).  `counters()` reports both as one.
CALLS: dict = {"calls": 0, "compiled_calls": 0}
_CACHES: dict = {}  # (code object, config key) -> FrameCache
_CACHES_LOCK = threading.Lock()


class FrameCache:
    def __init__(self, code):
        self.code = code
        self.entries: list = []  # replaced, never mutated in place (lock-free readers)
        self.lock = threading.RLock()
        self.warned = False
        self.miss_reasons: list = []  # (entry index, [failing guard descriptions])
        self.auto_dims: dict = {}  # source name -> dims whose size changed (dynamic=None)
        self.retired = False  # reset() dropped this cache: holders fetch a new one

    def lookup(self, L, G, C, B):
        for entry in self.entries:
            guards = entry.guards
            guards.calls += 1  # GuardSet.__call__, inlined: See Note [Sampled guard time]
            if guards.calls % TIME_EVERY == 1:
                inputs = guards.timed_check(L, G, C, B)
            else:
                inputs = guards.check(L, G, C, B)
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
        """Slow path: the failing guards of every entry, readable (counts each failure)."""
        reasons = []
        for i, entry in enumerate(self.entries):
            failed = entry.guards.failures(L, G, C, B)
            reasons.append((i, failed))
        self.miss_reasons = reasons
        return reasons

    def grow_dynamic(self, L, G, C, B) -> None:
        """Automatic dynamic: remember each argument dim whose size alone made an entry miss,
        so the next compile traces it as a symbol (See Note [Automatic dynamic])."""
        grown = dict(self.auto_dims)
        for entry in self.entries:
            for name, dims in entry.guards.changed_sizes(L, G, C, B).items():
                new = set(dims) - set(grown.get(name, ()))
                if new:
                    grown[name] = tuple(sorted(set(grown.get(name, ())) | new))
                    COUNTERS["automatic_dynamic_dims"] += len(new)
        self.auto_dims = grown

    def warn_limit(self, limit: int) -> None:
        if self.warned:
            return
        self.warned = True
        counts = Counter(r for _, failed in self.miss_reasons for r in failed)
        worst = counts.most_common(1)[0][0] if counts else "unknown"
        warnings.warn(f"refcomp: {self.code.co_name} ({self.code.co_filename}:"
                      f"{self.code.co_firstlineno}) hit cache_size_limit={limit}; calls that"
                      f" match no entry now run eagerly. Guard that kept failing: {worst}",
                      RuntimeWarning, stacklevel=4)


def cache_for(code, private=None, config: str = "") -> FrameCache:
    """The cache of `code` compiled with `config` (backend and options, see `config_key`).

    Two `refcomp.compile` wrappers of one function with different backends or options
    must not serve each other's entries, so the configuration is part of the key.
    """
    if private is not None:
        return private
    key = (code, config)
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
    out.update((k, n) for k, n in CALLS.items() if n)
    return out


def reset() -> None:
    with _CACHES_LOCK:
        for cache in _CACHES.values():
            cache.retired = True
        _CACHES.clear()
    COUNTERS.clear()
    for k in CALLS:
        CALLS[k] = 0
