"""One generated function that checks every entry of a frame's cache.

Owns: `build_lookup(entries) -> lookup(L, G, C, B) -> (entry, inputs) | None`.  It is
exactly the per-entry loop (`FrameCache.lookup`): entry i is returned iff its own
`GuardSet.check` would pass and every earlier entry's would fail, with the same
per-set counts (`calls`, per-line failures) that loop keeps.  Must not know how a
frame is traced; reads only what `GuardSet` generated.  Spec: spec/guards.md,
"Cache and recompiles".

Note [One lookup per cache]: a frame past its recompile limit (or one with several
entries) checked each entry by calling its own check function: ~0.5 us an entry
for the call, the `try`, re-reading the global state and re-loading the same
arguments, so 8 entries cost ~4 us, half of a tiny function's eager time.  The
lookup inlines every entry's lines into one function and checks the lines all
entries share *as a prefix* once (grad mode, default dtype, hooks, the loads of the
arguments): since those lines come first in every entry's own check, the first line
that fails is the same as it would be entry by entry, so the failure counts stay
exact.  A line is shared only when its text and every constant it names are the
same (`_same_constant`: identity, or equality of a plain value of the same type).
Each entry's remaining lines follow in a `while True:` block whose `break` is the
entry's "return None".  Timed checks (Note [Sampled guard time]) keep using the
per-entry loop; the cache uses this function for the other checks.
"""

from __future__ import annotations

import re

import torch

_PLAIN = (str, int, float, bool, type(None), torch.dtype, torch.device)
_CONST = re.compile(r"\b_k(\d+)\b")
_FAILS = re.compile(r"\b_F\[")


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


def build_lookup(entries: list):
    """The lookup of `entries` (in order) as one generated function."""
    sets = [e.guards for e in entries]
    codegens = [gs._codegen for gs in sets]
    shared = shared_prefix(codegens)
    namespace: dict = {"_id": id, "_type": type}
    for i, (e, gs, cg) in enumerate(zip(entries, sets, codegens)):
        namespace[f"_E{i}"], namespace[f"_S{i}"], namespace[f"_F{i}"] = \
            e, gs, gs.line_failures
        for name, value in cg.namespace.items():
            if name.startswith("_k"):
                namespace[f"_e{i}{name[1:]}"] = value

    def rename(text: str, i: int) -> str:
        return _FAILS.sub(f"_F{i}[", _CONST.sub(f"_e{i}k\\1", text))

    def fail_all(index: str) -> str:  # every entry fails at this shared line
        return "; ".join(f"_S{i}.calls += 1; _F{i}[{index}] += 1" for i in range(len(sets)))

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
    for i, (gs, cg) in enumerate(zip(sets, codegens)):
        body += ["while True:", f"    _S{i}.calls += 1", "    try:"]
        for item in cg.lines[shared:]:
            if item[0] == "load":
                body.append(f"        {rename(item[1], i)}")
            else:
                body.append(f"        if not ({rename(item[1], i)}):"
                            f" _F{i}[{item[2]}] += 1; break")
        body += [f"        {rename(gs._ret[0], i).replace('return (', f'return _E{i}, (', 1)}",
                 "    except Exception:", f"        _F{i}[-1] += 1", "    break"]
    body.append("return None")
    names = sorted(namespace)
    text = (f"def make({', '.join(names)}):\n    def lookup(L, G, C, B):\n"
            + "".join(f"        {line}\n" for line in body) + "    return lookup\n")
    scope: dict = {}
    exec(compile(text, "<refcomp cache lookup>", "exec"), scope)
    lookup = scope["make"](*(namespace[n] for n in names))
    lookup.source_code = text
    return lookup
