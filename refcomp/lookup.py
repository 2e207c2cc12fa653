"""One generated function that checks every entry of a frame's cache.

Owns: `build_lookup(entries) -> lookup(L, G, C, B) -> (entry, inputs) | None`.  It is
exactly the per-entry loop (`FrameCache.lookup`): entry i is returned iff its own
`GuardSet.check` would pass and every earlier entry's would fail, with the same
per-set counts (`calls`, per-line failures) that loop keeps.  Must not know how a
frame is traced; reads only what `GuardSet` generated.  Spec: spec/guards.md,
"Cache and recompiles".

Note [One lookup per cache]: checking each entry by calling its own check function cost
~0.5 us an entry (the call, the `try`, re-loading the same arguments): 8 entries ~4 us,
half of a tiny function's eager time.  The lookup inlines every entry's lines into one
function and checks the lines all entries share *as a prefix* once, so the first line
that fails, and so every count, is the same as entry by entry (spec/guards.md, "Cache
and recompiles").  A line is shared only when its text and every constant it names are
the same (`_same_constant`: identity, or equality of a plain value of the same type);
each entry's remaining lines follow in a `while True:` block whose `break` is the
entry's "return None".  Timed checks (Note [Sampled guard time]) keep the per-entry loop.
"""

from __future__ import annotations

import re

import torch

_PLAIN = (str, int, float, bool, type(None), torch.dtype, torch.device)
_CONST = re.compile(r"\b_k(\d+)\b")
_FAILS = re.compile(r"\b_F\[")
# An EQUALS_MATCH line on a plain value (guard_kinds._equals_emit; NaN and +-0.0 differ).
_VALUE_LINE = re.compile(r"^_type\((v\d+)\) is (_k\d+) and \1 == (_k\d+)$")
_HASHED = (int, float, str, bool)  # exact types whose == agrees with their hash


def _same_constant(a, b) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) in _PLAIN:
        return a == b
    if type(a) is tuple and len(a) == len(b):
        return all(_same_constant(x, y) for x, y in zip(a, b))
    return False


def _line_key(item, namespace: dict):
    """What makes two entries' lines the same check: kind, text, the constants it reads."""
    text = item[1]
    return item[0], text, [namespace[f"_k{n}"] for n in _CONST.findall(text)]


def _same_line(a, b) -> bool:
    return a[0] == b[0] and a[1] == b[1] and len(a[2]) == len(b[2]) and \
        all(_same_constant(x, y) for x, y in zip(a[2], b[2]))


def shared_prefix(codegens: list) -> int:
    """How many leading lines every entry's check has in common (see the module Note)."""
    if not codegens:
        return 0
    keyed = [[_line_key(item, cg.namespace) for item in cg.lines] for cg in codegens]
    n = min(len(k) for k in keyed)
    for i in range(n):
        first = keyed[0][i]
        if any(not _same_line(first, k[i]) for k in keyed[1:]):
            return i
    return n


class Tally:
    """What one generated lookup counted and has not yet added to its entries' counts.

    Note [Counts a lookup derives]: a guard set's `calls` and per-line failures must stay
    exact, but a frame past its recompile limit misses every entry on every call, and
    two counter updates per entry (calls, the failing line) were half of the lookup's
    cost.  So the lookup counts, in arrays of its own, only what it cannot derive:
    `reached`, the lookups that got past the shared lines; per entry, its `hits`, the
    failures of its lines after the first own require line (`later`, one list per
    entry) and its exceptions (`raised`).  Entries are checked in order and the first
    that passes returns, so entry i was checked by `reached` minus the hits of the
    entries before it, and every check of it that did not hit, raise or fail later
    failed at its first own line.  The shared lines count their failures directly, as
    the per-entry check does.  `flush` adds the new part of all that to the guard sets;
    reading a set's `calls` or `line_failures` flushes first, so readers never see a
    partial count.  A miss now costs each entry only its first line's check.
    """

    def __init__(self, entries: list, firsts: list):
        self.entries = entries
        self.firsts = firsts  # per entry: index of its first own require line, or None
        n = len(entries)
        self.reached = [0]
        self.hits, self.raised = [0] * n, [0] * n
        self.later = [[0] * len(e.guards._line_failures) for e in entries]
        self._done = self._now()
        for e in entries:
            e.guards.tallies.add(self)

    def _now(self):
        return (self.reached[0], list(self.hits), list(self.raised),
                [list(row) for row in self.later])

    def flush(self) -> None:
        reached0, hits0, raised0, later0 = self._done
        now = self._now()
        reach = now[0] - reached0
        for i, (e, first) in enumerate(zip(self.entries, self.firsts)):
            gs = e.guards
            hits, raised = now[1][i] - hits0[i], now[2][i] - raised0[i]
            later = [b - a for a, b in zip(later0[i], now[3][i])]
            gs._calls += reach
            for line, n in enumerate(later):
                gs._line_failures[line] += n
            gs._line_failures[-1] += raised
            if first is not None:
                gs._line_failures[first] += reach - hits - raised - sum(later)
            reach -= hits
        self._done = now

    def retire(self) -> None:
        """Count what is left and stop being consulted (the lookup is being replaced)."""
        self.flush()
        for e in self.entries:
            e.guards.tallies.discard(self)


def value_dispatch(codegens: list, shared: int):
    """(var, type, {value: entry index}) when every entry's first own line is
    `_type(var) is type and var == value` on one shared variable and type, with distinct
    values; else None.  See Note [One lookup per cache]: the lookup then finds the one
    entry whose first line can pass with one dict read."""
    var = typ = None
    table: dict = {}
    for i, cg in enumerate(codegens):
        own = cg.lines[shared:]
        match = _VALUE_LINE.match(own[0][1]) if own and own[0][0] == "require" else None
        if match is None:
            return None
        v, t, c = match[1], cg.namespace[match[2]], cg.namespace[match[3]]
        if t not in _HASHED or type(c) is not t or (var is not None and (v, t) != (var, typ)):
            return None
        var, typ = v, t
        if c in table:
            return None
        table[c] = i
    return (var, typ, table) if len(table) >= 2 else None


def build_lookup(entries: list):
    """The lookup of `entries` (in order) as one generated function; its `tally`
    holds the counts it derives (Note [Counts a lookup derives])."""
    sets = [e.guards for e in entries]
    codegens = [gs._codegen for gs in sets]
    shared = shared_prefix(codegens)
    firsts = [next((item[2] for item in cg.lines[shared:] if item[0] != "load"), None)
              for cg in codegens]
    tally = Tally(entries, firsts)
    namespace: dict = {"_id": id, "_type": type, "_R": tally.reached,
                       "_H": tally.hits, "_X": tally.raised}
    for i, (e, gs, cg) in enumerate(zip(entries, sets, codegens)):
        namespace[f"_E{i}"], namespace[f"_S{i}"], namespace[f"_F{i}"] = \
            e, gs, gs._line_failures
        namespace[f"_L{i}"] = tally.later[i]
        for name, value in cg.namespace.items():
            if name.startswith("_k"):
                namespace[f"_e{i}{name[1:]}"] = value

    def rename(text: str, i: int) -> str:
        return _FAILS.sub(f"_F{i}[", _CONST.sub(f"_e{i}k\\1", text))

    def fail_all(index: str) -> str:  # every entry fails at this shared line
        return "; ".join(f"_S{i}._calls += 1; _F{i}[{index}] += 1" for i in range(len(sets)))

    body = []
    if shared:
        body.append("try:")
        for item in codegens[0].lines[:shared]:
            if item[0] == "load":
                body.append(f"    {rename(item[1], 0)}")
            else:
                body.append(f"    if not ({rename(item[1], 0)}): {fail_all(item[2])};"
                            " return None")
        body += ["except Exception:", f"    {fail_all(-1)}; return None"]
    body.append("_R[0] += 1")
    dispatch = value_dispatch(codegens, shared)
    if dispatch is not None:
        var, namespace["_T"], namespace["_D"] = dispatch
        body.append(f"_c = _D.get({var}, -1) if _type({var}) is _T else -1")
    for i, (gs, cg) in enumerate(zip(sets, codegens)):
        own = cg.lines[shared:]
        cut = next((k + 1 for k, item in enumerate(own) if item[0] != "load"), len(own))
        block = []
        # Up to and including the first require line: its failures are derived.
        block += ["while True:", "    try:"]
        for item in own[:cut]:
            if item[0] == "load":
                block.append(f"        {rename(item[1], i)}")
            else:
                block.append(f"        if not ({rename(item[1], i)}): break")
        block += ["        pass", "    except Exception:", f"        _X[{i}] += 1; break",
                  "    try:"]
        for item in own[cut:]:
            if item[0] == "load":
                block.append(f"        {rename(item[1], i)}")
            else:
                block.append(f"        if not ({rename(item[1], i)}):"
                             f" _L{i}[{item[2]}] += 1; break")
        result = rename(gs._ret[0], i)[len("return "):]
        block += [f"        result = _E{i}, {result}", "    except Exception:",
                  f"        _X[{i}] += 1; break", f"    _H[{i}] += 1", "    return result"]
        if dispatch is not None:  # only the entry the value picked can pass its first line
            block = [f"if _c == {i}:"] + ["    " + line for line in block]
        body += block
    body.append("return None")
    # The constants are the function's globals, not a closure as in a single entry's
    # check: a call copies every closure cell into its frame and clears it on return,
    # and a lookup of 8 entries names ~130 constants (~40% of its cost, measured).
    text = "def lookup(L, G, C, B):\n" + "".join(f"    {line}\n" for line in body)
    scope: dict = dict(namespace)
    exec(compile(text, "<refcomp cache lookup>", "exec"), scope)
    lookup = scope["lookup"]
    lookup.source_code = text
    lookup.tally = tally
    return lookup
