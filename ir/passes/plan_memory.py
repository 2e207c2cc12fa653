"""The `plan_memory` pass: give every intermediate buffer an offset in one arena.

Owns: the planning algorithm (liveness, in-place reuse, best-fit placement).  The
plan's data, text form and checker live in ir/plan.py.  Spec: spec/memory.md.

Algorithm:
0. Order: the input's node order, or a memory-aware topological order
   (`memory_order`) when planning that order gives a smaller arena.
1. Steps are the top-level nodes in that order.  Top-level
   layout results are views of their operand, not buffers; reading a view keeps
   the viewed buffer live (`ir.plan.liveness`).
2. In place: a result of a pointwise region takes the bytes of an operand buffer
   that dies at that step when `ir.plan.inplace_safe` allows it; the two then form
   one *group* whose live range is the union of theirs.
3. Groups are placed largest first (by size; symbolic sizes compare at a hint of 64
   per symbol, which only steers the choice).  A group may sit at offset 0 or at the
   end of any placed group it is live with; of the offsets that provably clear every
   such group, the best fit is the one leaving the smallest hole above it.  If none
   can be proven (incomparable symbolic sizes), the group goes above all of them at
   the sum of their ends, which is provably clear.
Graph inputs and outputs are never in the arena: the caller owns them.
"""

from __future__ import annotations

import bisect
import functools
import math

import sympy

from ir.graph import Graph
from ir.passes.registry import register_pass
from ir.plan import (
    MemoryPlan,
    Slot,
    View,
    aligned,
    bytes_root,
    inplace_safe,
    intermediates,
    liveness,
    same_bytes_views,
    views_in,
)
from ir.types import is_symbolic, simplify_dim

HINT = 64  # a size symbol's value when ranking symbolic sizes (never for correctness)


@register_pass("plan_memory")
def plan_memory(graph: Graph) -> Graph:
    """Order the top-level nodes and attach a MemoryPlan (spec/memory.md).

    Rewrites: the order of top-level nodes, only when a memory-aware order gives a
    smaller arena than the input's order; the result carries `plan`.  Requires: a
    verified graph (normally after `fuse`).  Preserves: nodes, inputs, outputs,
    results, the relative order of effectful nodes.  Guarantees (checked by
    `ir.plan.check_plan`): every intermediate has a slot or is a view; live slots
    never share bytes except a safe in-place reuse; no graph input or output is in
    the arena.  Idempotent up to the order it picks (replans from scratch).  A graph
    with a buffer whose size is not a polynomial in the size symbols is returned as it
    is, unplanned: its values are fresh tensors (no arena).
    """
    try:
        best = _planned(graph)
    except NotImplementedError:  # ir/plan.py `aligned`: only polynomial sizes
        return graph
    order = memory_order(graph)
    if order != graph.nodes:
        other = _planned(graph.with_nodes(order))
        if _arena_hint(other.plan) < _arena_hint(best.plan):
            best = other
    return best


def memory_order(graph: Graph) -> list:
    """A topological order that runs next the ready node freeing the most bytes net of
    what it allocates (ties: original position); effectful nodes keep their order."""
    position = {node: i for i, node in enumerate(graph.nodes)}
    producer = {v: node for node in graph.nodes for v in node.outputs}
    users: dict = {}
    for node in graph.nodes:
        for v in node.inputs:
            users.setdefault(v, []).append(node)
    view_of = views_in(graph)
    outputs = set(graph.outputs)
    buffer = {v for v in intermediates(graph) if v not in view_of}
    waiting = {node: {producer[v] for v in node.inputs if v in producer}
               for node in graph.nodes}
    effectful = [n for n in graph.nodes if any(m.op.effects for m in _with_body(n))]
    reads_left = {v: len(us) for v, us in users.items()}
    done: set = set()
    out: list = []

    def gain(node) -> int:
        freed = sum(_hint(aligned(v.type.nbytes())) for v in set(node.inputs)
                    if v in buffer and reads_left[v] == node.inputs.count(v))
        made = sum(_hint(aligned(v.type.nbytes())) for v in node.outputs
                   if v in buffer and v not in outputs)
        return freed - made

    # Readiness is kept as nodes finish (a scan of every node per step was quadratic).
    remaining = {node: len(deps) for node, deps in waiting.items()}
    dependents: dict = {}
    for node, deps in waiting.items():
        for dep in deps:
            dependents.setdefault(dep, []).append(node)
    ready = {node for node, count in remaining.items() if count == 0}
    effects_done = 0
    effectful_set = set(effectful)
    while len(out) < len(graph.nodes):
        next_effect = effectful[effects_done] if effects_done < len(effectful) else None
        node = max((n for n in ready if n is next_effect or n not in effectful_set),
                   key=lambda n: (gain(n), -position[n]))
        out.append(node)
        done.add(node)
        ready.discard(node)
        if node is next_effect:
            effects_done += 1
        for v in node.inputs:
            reads_left[v] -= 1
        for later in dependents.get(node, ()):
            remaining[later] -= 1
            if remaining[later] == 0:
                ready.add(later)
    return out


def _with_body(node):
    yield node
    if node.body is not None:
        yield from node.body.walk()


def _planned(graph: Graph) -> Graph:
    """`graph` (its node order as given) with a fresh plan attached."""
    view_of = views_in(graph)
    live = liveness(graph)
    buffers = [v for v in intermediates(graph) if v not in view_of]
    reuse = _inplace_pairs(graph, buffers, live, view_of, same_bytes_views(graph))
    # Groups: chains of buffers that take over each other's bytes, first owner first.
    group_of = {}
    groups: list[list] = []
    for v in buffers:
        if v in reuse and reuse[v] in group_of:
            group = group_of[reuse[v]]
        else:
            group = []
            groups.append(group)
        group.append(v)
        group_of[v] = group
    placed: list[tuple] = []  # (first, last, offset, size)
    offset_of = {}
    for group in sorted(groups, key=lambda g: (-_hint(aligned(g[0].type.nbytes())),
                                               live[g[0]][0])):
        size = aligned(group[0].type.nbytes())
        first, last = live[group[0]][0], live[group[-1]][1]
        conflicts = [p for p in placed if not (p[1] < first or last < p[0])]
        offset = _best_fit(size, conflicts)
        placed.append((first, last, offset, size))
        for v in group:
            offset_of[v] = offset
    slots = [Slot(v, offset_of[v], aligned(v.type.nbytes()), live[v], reuse.get(v))
             for v in buffers]
    views = [View(v, view_of[v]) for v in intermediates(graph) if v in view_of]
    out = Graph(graph.name, graph.inputs, graph.nodes, graph.outputs)
    out.plan = MemoryPlan(slots, views)
    return out


def _inplace_pairs(graph, buffers, live, view_of, same_bytes) -> dict:
    """result -> the dying operand whose bytes it takes (each operand at most once); an
    operand read through a reshape (`ir.plan.same_bytes_views`) is a candidate too."""
    is_buffer = set(buffers)
    reuse, taken = {}, set()
    for step, node in enumerate(graph.nodes):
        for result in node.outputs:
            if result not in is_buffer:
                continue
            for operand in dict.fromkeys(bytes_root(v, same_bytes) for v in node.inputs):
                if operand not in is_buffer or operand in taken or live[operand][1] != step:
                    continue
                if aligned(operand.type.nbytes()) != aligned(result.type.nbytes()):
                    continue
                if inplace_safe(node, operand, result, view_of, same_bytes):
                    continue
                reuse[result] = operand
                taken.add(operand)
                break
    return reuse


def _best_fit(size, conflicts):
    """The lowest-waste offset clear of every conflicting (first, last, offset, size)."""
    if isinstance(size, int) and all(isinstance(c[2], int) and isinstance(c[3], int)
                                     for c in conflicts):
        return _best_fit_static(size, conflicts)
    candidates = [0] + [simplify_dim(c[2] + c[3]) for c in conflicts]
    # The same test as `provably_nonneg`, on polynomials as dicts (sympy arithmetic on
    # every candidate/conflict pair cost seconds for a graph with symbolic sizes).
    size_p = _poly(size)
    spans = [(_poly(c[2]), _padd(_poly(c[2]), _poly(c[3])), c[2]) for c in conflicts]
    best, best_key = None, None
    for offset in candidates:
        start = _poly(offset)
        end = _padd(start, size_p)
        below = [_nonneg(_psub(lo, end)) for lo, _, _ in spans]
        if not all(b or _nonneg(_psub(start, hi)) for b, (_, hi, _) in zip(below, spans)):
            continue
        above = [c for b, (_, _, c) in zip(below, spans) if b]
        hole = min((_hint(a) - _hint(offset) - _hint(size) for a in above), default=None)
        key = (hole is None, hole if hole is not None else 0, _hint(offset))
        if best_key is None or key < best_key:
            best, best_key = offset, key
    if best is None:  # nothing provable: stack above everything it is live with
        best = simplify_dim(sum((c[2] + c[3] for c in conflicts), 0))
    return best


@functools.lru_cache(maxsize=65536)
def _poly(expr) -> tuple:
    """A size polynomial as ((monomial, coefficient), ...), a monomial being
    ((symbol name, power), ...)."""
    if not is_symbolic(expr):
        return (((), int(expr)),) if int(expr) else ()
    out = []
    for term, coeff in sympy.expand(expr).as_coefficients_dict().items():
        powers = tuple(sorted((str(b), int(e)) for b, e in term.as_powers_dict().items()
                              if b != 1))
        if int(coeff):
            out.append((powers, int(coeff)))
    return tuple(sorted(out))


def _padd(a: tuple, b: tuple, sign: int = 1) -> tuple:
    acc = dict(a)
    for m, c in b:
        acc[m] = acc.get(m, 0) + sign * c
    return tuple(sorted((m, c) for m, c in acc.items() if c))


def _psub(a: tuple, b: tuple) -> tuple:
    return _padd(a, b, -1)


@functools.lru_cache(maxsize=65536)
def _nonneg(poly: tuple) -> bool:
    """`provably_nonneg` of a `_poly`: with every size s = t + 1 (t >= 0), all the
    coefficients of the polynomial in the t's are >= 0."""
    acc: dict = {}
    for monomial, coeff in poly:
        terms = {(): coeff}
        for name, power in monomial:  # (t + 1) ** power, binomially
            terms = {m + ((name, j),) if j else m: c * math.comb(power, j)
                     for m, c in terms.items() for j in range(power + 1)}
        for m, c in terms.items():
            acc[m] = acc.get(m, 0) + c
    return all(c >= 0 for c in acc.values())


def _best_fit_static(size: int, conflicts) -> int:
    """`_best_fit` where every size and offset is a number, in O(C log C): the occupied
    bytes as merged intervals; a candidate (0 or the end of a conflict) fits when it
    starts in a gap at least `size` long, and the tightest fit (then the lowest) wins."""
    merged: list = []
    for start, end in sorted((c[2], c[2] + c[3]) for c in conflicts):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    starts = [m[0] for m in merged]
    best, best_key = None, None
    for offset in [0] + [c[2] + c[3] for c in conflicts]:
        i = bisect.bisect_right(starts, offset)  # merged[i] is the first starting after it
        if i and merged[i - 1][1] > offset:
            continue  # inside occupied bytes
        if i < len(merged) and offset + size > starts[i]:
            continue  # runs into the next occupied bytes
        hole = starts[i] - offset - size if i < len(merged) else None
        key = (hole is None, hole if hole is not None else 0, offset)
        if best_key is None or key < best_key:
            best, best_key = offset, key
    return best


def _arena_hint(plan) -> int:
    """The arena's bytes at the hint sizes (not `arena_bytes`: a sympy Max of many
    symbolic ends costs seconds to simplify)."""
    return max((_hint(s.offset + s.size) for s in plan.slots), default=0)


def _hint(d) -> int:
    if not is_symbolic(d):
        return int(d)
    return int(d.subs({s: HINT for s in d.free_symbols}))

