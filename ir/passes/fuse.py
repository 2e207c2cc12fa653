"""The `fuse` pass: group pointwise and reduction nodes into kernel regions.

Owns: the fusion rules (which nodes share a region), the region kinds
("pointwise", "reduction", "rowwise") and the construction of `fused` nodes with
their bodies.  Must not know: backends, memory planning.  Spec: spec/fusion.md.

Note [Fusion model]: work nodes (pointwise, reduction) are grouped, free nodes (index
maps, `full` of any shape) are copied into every region that reads through them, boundaries
stay top-level; a region has a domain (a shape S, reduced dims R) and each body value a
space (FULL, REDUCED, SCALAR).  Legality and the region kinds: spec/fusion.md, "Node
classes" and "Domains and kinds".  Layout ops on FULL computed values end the region:
the value is stored and read through the layout as an index map (a broadcast would
otherwise recompute it once per copy).
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass, field
from typing import Optional

from ir.facts import has_effects
from ir.facts import view_root as trace
from ir.graph import Graph, Node, Value
from ir.ops.registry import POINTWISE, REDUCTION, lookup
from ir.ops.rules import normalize_dim, normalize_dims, reduced_shape
from ir.passes.registry import register_pass
from ir.printer import value_names

log = logging.getLogger("ir.fuse")

ROW_BROADCASTS = frozenset({"reshape", "squeeze", "unsqueeze", "expand"})
FULL, REDUCED, SCALAR = "full", "reduced", "scalar"
# Creations computed inside the kernels that read them (Note [Sizes as tensors]): rank-0
# ones, and a `full` of any shape (a constant per element).
SCALAR_CREATION = ("full", "size_value")
# A row kernel runs one pass per dependent reduction and recomputes the row's pointwise
# values in each (spec/codegen.md); two passes cover softmax, log_softmax and layer_norm.
MAX_ROW_PASSES = 2


class Refusal(Exception):
    """Why two groups cannot share a region (the text of the log line)."""


@dataclass
class FusionResult:
    """The fused graph and every refusal, as logged: `cannot fuse %a with %b: why`."""

    graph: Graph
    refusals: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Domain:
    kind: str  # "pointwise" | "reduction" | "rowwise"
    shape: tuple  # S
    dims: Optional[tuple]  # R (None without reductions)


# --- classification ---------------------------------------------------------------------
def is_work(node: Node) -> bool:
    return node.body is None and node.op.category in (POINTWISE, REDUCTION)


def is_free(node: Node) -> bool:
    if node.op.index_map:
        return True
    return node.op.name in SCALAR_CREATION and (len(node.outputs[0].type.shape) == 0 or
                                                node.op.name == "full")


def reduce_domain(node: Node) -> tuple[tuple, tuple]:
    """(S, R): the shape a reduction reads and the dims it reduces (normalized)."""
    shape = node.inputs[0].type.shape
    if "dim" in node.attrs:  # argmax/argmin: dim=None reduces every dim
        dim = node.attrs["dim"]
        dims = tuple(range(len(shape))) if dim is None else (normalize_dim(dim, len(shape)),)
    else:
        dims = normalize_dims(node.attrs.get("dims", ()), len(shape))
    return tuple(shape), dims


# --- the legality of one region ---------------------------------------------------------
def region_domain(members: list[Node], producers: dict) -> Domain:
    """The domain of a region made of `members` (work nodes, in order), or Refusal."""
    member_set = set(members)
    reductions = [n for n in members if n.op.category == REDUCTION]
    if reductions:
        shape, dims = reduce_domain(reductions[0])
        for r in reductions[1:]:
            if reduce_domain(r) != (shape, dims):
                other = reduce_domain(r)
                raise Refusal(f"reductions over different domains ({_dom(shape, dims)} vs"
                              f" {_dom(*other)})")
        reduced = {reduced_shape(shape, dims, True), reduced_shape(shape, dims, False)}
    else:
        # Without reductions every computed value of rank > 0 is FULL: name a layout op
        # on one before the shape mismatch it causes.
        for node in members:
            for v in node.inputs:
                root, chain = trace(v, producers)
                if chain and producers.get(root) in member_set and root.type.rank > 0:
                    _row_broadcast(FULL, chain, (), set())
        shapes = {tuple(n.outputs[0].type.shape) for n in members
                  if n.outputs[0].type.rank > 0}
        if len(shapes) > 1:
            listed = " vs ".join(_shape(s) for s in sorted(shapes, key=str))
            raise Refusal(f"pointwise ops over different shapes ({listed})")
        shape, dims = (shapes.pop() if shapes else ()), None
        reduced = set()
    space: dict[Value, str] = {}
    passes: dict[Value, int] = {}  # reductions on the longest path to the value
    rowwise = False
    for node in members:
        operand_spaces, operand_passes = [], 0
        for v in node.inputs:
            root, chain = trace(v, producers)
            if producers.get(root) in member_set:
                sp = _row_broadcast(space[root], chain, shape, reduced)
                operand_passes = max(operand_passes, passes[root])
            else:
                sp = _load_space(v, shape, reduced)
            operand_spaces.append(sp)
        out = node.outputs[0]
        if node.op.category == REDUCTION:
            rowwise = rowwise or operand_passes > 0
            space[out], passes[out] = REDUCED, operand_passes + 1
            if passes[out] > MAX_ROW_PASSES:
                raise Refusal(f"a row would need {passes[out]} reduction passes (at most"
                              f" {MAX_ROW_PASSES}: each pass recomputes the row's values)")
            continue
        sp = FULL if FULL in operand_spaces else REDUCED if REDUCED in operand_spaces \
            else SCALAR
        _check_fits(out, sp, shape, reduced)
        if sp == FULL and operand_passes and tuple(out.type.shape) not in reduced:
            rowwise = True
        space[out], passes[out] = sp, operand_passes
    kind = "pointwise" if not reductions else "rowwise" if rowwise else "reduction"
    return Domain(kind, tuple(shape), dims)


def _load_space(v: Value, shape, reduced) -> str:
    s = tuple(v.type.shape)
    if s == shape:
        return FULL
    if s in reduced:
        return REDUCED
    if s == ():
        return SCALAR
    raise Refusal(f"operand of shape {_shape(s)} is outside the region's domain {_shape(shape)}")


def _row_broadcast(sp: str, chain: list[Node], shape, reduced) -> str:
    """The space of a computed value read through `chain` inside its own region."""
    for node in chain:
        if sp == FULL:
            raise Refusal(f"{node.op.name} of a computed value is an index map of a stored"
                          " buffer, not fused")
        if node.op.name not in ROW_BROADCASTS:
            raise Refusal(f"{node.op.name} of a row value is not a row broadcast")
        out = tuple(node.outputs[0].type.shape)
        if node.op.name == "expand" and out == shape:
            sp = FULL
        elif out not in reduced and out != () and not all(d == 1 for d in out):
            raise Refusal(f"{node.op.name} to {_shape(out)} leaves the region's domain"
                          f" {_shape(shape)}")
    return sp


def _check_fits(out: Value, sp: str, shape, reduced) -> None:
    s = tuple(out.type.shape)
    ok = (s == shape) if sp == FULL else (s in reduced or s == ()) if sp == REDUCED \
        else s == ()
    if not ok:
        raise Refusal(f"a {sp} value of shape {_shape(s)} does not fit the domain"
                      f" {_shape(shape)}")


def _shape(s) -> str:
    return "[" + ",".join(str(d).replace(" ", "") for d in s) + "]"


def _dom(shape, dims) -> str:
    return f"{_shape(shape)} over dims {list(dims)}"


# --- grouping -----------------------------------------------------------------------------
_CYCLE = "another kernel runs between them (fusing would form a cycle)"


class _Groups:
    """Union-find over work nodes, with the legality checks of a merge.

    Note [Cycle check in near-linear time]: a merge is refused when a path leaves the
    union and re-enters it through a non-free node (`_creates_cycle`).  Walking every
    descendant per candidate made fusion quadratic (a 80-block CNN's training step spent
    40 s there).  Two things keep each check local: (1) the graph's static reachability,
    as bitmasks per node and ORed per group, refuses at once a union that a real node
    outside it both follows and precedes (grouping only adds paths, so such a cycle is
    certain); (2) the walk for the rest skips every node past `_bound(union)`, the last
    position from which a path can still come back down into the union (graph order is
    topological; only a jump to another member of a group goes back, and `_Fenwick`
    keeps, per group, its first and last position).  Same decisions as the full walk.
    """

    def __init__(self, graph: Graph, names: dict):
        self.graph = graph
        self.names = names
        self.order = {node: i for i, node in enumerate(graph.nodes)}
        self.producers = graph.producers()
        uses = graph.uses()
        self.succ = {n: [u for v in n.outputs for u in uses.get(v, [])] for n in graph.nodes}
        # Effectful nodes run in program order (a random draw after a seed): each one is a
        # predecessor of the next, so a region that would feed an earlier effect and read a
        # later one is a cycle, refused like any other.
        effectful = [n for n in graph.nodes if has_effects(n)]
        for a, b in zip(effectful, effectful[1:]):
            self.succ[a].append(b)
        self.parent = {n: n for n in graph.nodes if is_work(n)}
        self.members = {n: [n] for n in self.parent}
        self.refusals: list[str] = []
        self._static_reachability()
        self.span = {n: (self.order[n], self.order[n]) for n in self.parent}
        self.last = _Fenwick(len(graph.nodes))

    def _static_reachability(self) -> None:
        nodes = self.graph.nodes
        bit = {n: 1 << i for i, n in enumerate(nodes)}
        before = {n: 0 for n in nodes}
        for n in nodes:
            for s in self.succ[n]:
                before[s] |= before[n] | bit[n]
        after = {n: 0 for n in nodes}
        for n in reversed(nodes):
            for s in self.succ[n]:
                after[n] |= after[s] | bit[s]
        self.real = sum(bit[n] for n in nodes if not is_free(n))
        # per group head: (its members' bits, their ancestors, their descendants)
        self.reach = {n: (bit[n], before[n], after[n]) for n in self.parent}

    def find(self, n: Node) -> Node:
        while self.parent[n] is not n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def try_merge(self, a: Node, b: Node, why_context: Optional[tuple[Node, Node]]) -> bool:
        """Merge the groups of a and b if legal; log the refusal unless why_context is None."""
        ga, gb = self.find(a), self.find(b)
        if ga is gb:
            return True
        (bits_a, before_a, after_a), (bits_b, before_b, after_b) = self.reach[ga], \
            self.reach[gb]
        bits, before, after = bits_a | bits_b, before_a | before_b, after_a | after_b
        union = None  # built only past the reachability test (most refusals stop there)
        try:
            if before & after & self.real & ~bits:
                raise Refusal(_CYCLE)
            union = sorted(self.members[ga] + self.members[gb], key=self.order.get)
            if self._creates_cycle(set(union)):
                raise Refusal(_CYCLE)
            region_domain(union, self.producers)
        except Refusal as why:
            if why_context is not None:
                self.refuse(*why_context, str(why))
            return False
        self.parent[gb] = ga
        self.members[ga] = union
        del self.members[gb]
        self.reach[ga] = (bits, before, after)
        del self.reach[gb]
        first, last = min(self.span[ga][0], self.span[gb][0]), \
            max(self.span[ga][1], self.span[gb][1])
        self.span[ga] = (first, last)
        self.last.raise_to(first, last)
        return True

    def refuse(self, a: Node, b: Node, why: str) -> None:
        message = f"cannot fuse {self.names[a.outputs[0]]} with {self.names[b.outputs[0]]}: {why}"
        log.debug(message)
        self.refusals.append(message)

    def _bound(self, union) -> int:
        """The last graph position from which a path can come back into `union`: a path
        only rises in position, except by a jump to another member of a group, and a
        group starting at or before the bound has every member before it (fixed point)."""
        bound = max(self.order[m] for m in union)
        while True:
            higher = self.last.max_through(bound)
            if higher <= bound:
                return bound
            bound = higher

    def _creates_cycle(self, union: set, bound: Optional[int] = None) -> bool:
        """Whether merging `union` forms a cycle, walking no node past `bound` (default
        `_bound(union)`, the last position a path can come back from; a test passes the
        graph's end to walk every path)."""
        # A path leaving the union and re-entering it through a non-free node means the
        # region would both feed and consume another kernel.  Paths made only of free
        # nodes are copied into the body and are harmless.  Another group is one kernel:
        # a path reaching one of its members goes on from all of them (the union feeding
        # one member of a group whose other member feeds the union is a cycle too:
        # corpus grad_fuse_cyclic_region_graph).  Nodes past `_bound` cannot lead back.
        bound = self._bound(union) if bound is None else bound
        order = self.order
        stack = [(s, not is_free(s)) for m in union for s in self.succ[m]
                 if s not in union and order[s] <= bound]
        seen = set()
        expanded = set()  # groups whose members are on the stack
        while stack:
            node, real = stack.pop()
            if node in union:
                if real:
                    return True
                continue
            if (node, real) in seen:
                continue
            seen.add((node, real))
            if node in self.parent and self.find(node) not in expanded:
                expanded.add(self.find(node))
                stack.extend((m, True) for m in self.members[self.find(node)] if m is not node)
            for s in self.succ[node]:
                if order[s] <= bound:
                    stack.append((s, real or (s not in union and not is_free(s))))
        return False

    def groups(self) -> list[list[Node]]:
        return list(self.members.values())


class _Fenwick:
    """Prefix maximum over graph positions: `raise_to(i, v)` records a group spanning
    positions i..v; `max_through(k)` is the last position of any group starting at or
    before k (0 if none).  Values only grow, so a merged group's stale entries are
    dominated by its new one."""

    def __init__(self, size: int):
        self.tree = [0] * (size + 1)

    def raise_to(self, i: int, value: int) -> None:
        i += 1
        while i < len(self.tree):
            if self.tree[i] < value:
                self.tree[i] = value
            i += i & -i

    def max_through(self, k: int) -> int:
        k += 1
        best = 0
        while k > 0:
            if self.tree[k] > best:
                best = self.tree[k]
            k -= k & -k
        return best


def _prologues(groups: _Groups) -> None:
    """Each reduction first takes the pointwise producers that only it reads.

    Done before `_vertical` so that where a chain must be split (a third row pass, a
    different domain) the split falls before a reduction's private prologue, not
    after it: the stored value is then the one the next region really needs.
    Failed attempts here are not refusals; `_vertical` retries and logs them.
    """
    for node in groups.graph.nodes:
        if not is_work(node) or node.op.category != REDUCTION:
            continue
        stack = [node]
        while stack:
            for v in stack.pop().inputs:
                root, chain = trace(v, groups.producers)
                producer = groups.producers.get(root)
                if chain or producer is None or not is_work(producer) or \
                        producer.op.category != POINTWISE:
                    continue
                if groups.find(producer) is groups.find(node):
                    continue
                readers = _readers(groups, producer)
                if _reads_stored_value(groups, producer, node):
                    continue
                if all(r in groups.parent and groups.find(r) is groups.find(node)
                       for r in readers) and groups.try_merge(producer, node, None):
                    stack.append(producer)


def _readers(groups: _Groups, node: Node) -> list[Node]:
    """The non-free nodes reading node's results, directly or through free nodes."""
    out, stack = [], list(groups.succ[node])
    while stack:
        user = stack.pop()
        if is_free(user):
            stack.extend(groups.succ[user])
        else:
            out.append(user)
    return out


def _vertical(groups: _Groups) -> None:
    """Producers into consumers, in program order (prologues, epilogues, rows, chains)."""
    for node in groups.graph.nodes:
        if not is_work(node):
            continue
        for v in node.inputs:
            root, _ = trace(v, groups.producers)
            producer = groups.producers.get(root)
            if producer is None or (producer.op.name in SCALAR_CREATION and
                                    is_free(producer)):
                continue
            if not is_work(producer):
                groups.refuse(producer, node, f"{producer.op.name} ({producer.op.category})"
                              " is a region boundary")
                continue
            if _reads_stored_value(groups, producer, node):
                groups.refuse(producer, node, "an outer reduction reads a value stored anyway"
                              " (Note [Outer reductions read stored values])")
                continue
            groups.try_merge(producer, node, (producer, node))


def _reads_stored_value(groups: _Groups, producer: Node, node: Node) -> bool:
    """Note [Outer reductions read stored values]: a reduction over outer dims (not the
    innermost) of a pointwise value that is stored anyway (a graph output, or read by
    an op outside any region: a matmul) reads the stored value instead of computing it
    in its own tiled kernel.  The GELU gradient and its bias gradient ([1024, 1024]):
    one tiled kernel storing the gradient took 3.0 ms, the gradient kernel and a column
    sum of its result 1.31 + 0.57 ms (ATen: 1.31 + 0.50); the second read of the
    gradient costs less than the tile's per-lane accumulator traffic saves."""
    if node.op.category != REDUCTION or producer.op.category != POINTWISE:
        return False
    shape, dims = reduce_domain(node)
    if not dims or len(shape) - 1 in dims:
        return False
    outputs = set(groups.graph.outputs)
    return any(v in outputs for v in producer.outputs) or \
        any(r not in groups.parent for r in _readers(groups, producer))


# Note [Pointwise siblings]: two pointwise regions over one shape that load a common
# value of that whole size (of that shape, or read through a reshape: a saved matmul
# result) share a region, with a result each: the value is read once, and what both
# compute of it is computed once (the backend's CSE inside the kernel).
# A training step's backward recomputes GELU(h) for the second weight's gradient and
# computes GELU's gradient from h: as two kernels each read h and computed erf(h / sqrt 2)
# (1.05 + 1.35 ms for [8, 128, 1024]); as one, ~1.8 ms (lm2_train one process
# 133.7 -> 131.7 ms).  The region runs after the inputs of both (a matmul's result),
# which the cycle check allows only if neither feeds the other through another kernel.
# A common smaller load (a broadcast bias) saves little and is no reason to merge.  The
# merged results are alive together: mlp_train's backward arena grew by one of them
# (5.2 -> 9.4 MB; lm2_train's shrank, 24.2 -> 20.0 MB; bench/TRAINING.md).
def _siblings(groups: _Groups) -> None:
    """Reductions over one domain, and pointwise regions over one shape, whose regions
    read a common input share a region (Note [Pointwise siblings])."""
    def loads(members):
        inside = set(members)
        roots = set()
        for n in members:
            for v in n.inputs:
                root, _ = trace(v, groups.producers)
                if groups.producers.get(root) not in inside:
                    roots.add(root)
        return roots

    def domain(members):
        reductions = [n for n in members if n.op.category == REDUCTION]
        if reductions:
            return reduce_domain(reductions[0])
        # Note [Pointwise siblings]: a pointwise region is keyed by its shape; only a
        # common load of that whole size makes two of them one.
        shapes = {tuple(n.outputs[0].type.shape) for n in members}
        return ("pointwise", shapes.pop()) if len(shapes) == 1 else None

    def shares_load(a, b):
        common = loads_of(a) & loads_of(b)
        d = domain(groups.members[a])
        if d[0] != "pointwise":
            return bool(common)
        return any(_numel(v.type.shape) == _numel(d[1]) for v in common)

    # Each pass tries the pairs (a, later head b) in the order a loop over all pairs
    # would, skipping the heads of another domain (they never merge with a); a head's
    # loads are computed once per pass, and a's again after it grows.
    changed = True
    while changed:
        changed = False
        heads = sorted(groups.members, key=groups.order.get)
        by_domain: dict = {}
        for head in heads:
            d = domain(groups.members[head])
            if d is not None:
                by_domain.setdefault(d, []).append(head)
        cached = {}

        def loads_of(head):
            if head not in cached:
                cached[head] = loads(groups.members[head])
            return cached[head]

        position = {head: i for same in by_domain.values() for i, head in enumerate(same)}
        for a in heads:
            same = by_domain.get(domain(groups.members[a])) if a in groups.members else None
            if same is None:
                continue
            for b in same[position[a] + 1:]:
                if a not in groups.members or b not in groups.members:
                    continue
                if not shares_load(a, b):
                    continue
                if groups.try_merge(a, b, (a, b)):
                    changed = True
                    cached.pop(a, None)


def _numel(shape):
    n = 1
    for d in shape:
        n = n * d
    return n


# --- building the fused graph -------------------------------------------------------------
@register_pass("fuse")
def fuse(graph: Graph) -> Graph:
    """Group pointwise and reduction nodes into `fused` regions (spec/fusion.md).

    Rewrites: every pointwise/reduction node into exactly one region (never copied);
    index maps and constants are copied into the regions that read them.
    Requires: a verified graph without composite ops (run `decompose` first).
    Preserves: inputs, outputs and their order; interpreter results; the relative
    order of effectful nodes.  Idempotent: regions are boundaries to a second run.
    Refusals are logged to "ir.fuse" as `cannot fuse %a with %b: why`.
    """
    return fuse_with_report(graph).graph


def fuse_with_report(graph: Graph) -> FusionResult:
    """`fuse`, also returning every refusal."""
    names = value_names(graph)
    groups = _Groups(graph, names)
    _prologues(groups)
    _vertical(groups)
    _siblings(groups)
    return FusionResult(_rebuild(graph, groups), groups.refusals)


def _rebuild(graph: Graph, groups: _Groups) -> Graph:
    producers = groups.producers
    order = groups.order
    # Free nodes stay at top level only when a boundary node or the caller reads them.
    needed_top = set(graph.outputs)
    kept: set[Node] = set()
    for node in reversed(graph.nodes):
        if is_work(node):
            continue
        if not is_free(node) or any(v in needed_top for v in node.outputs):
            kept.add(node)
            needed_top.update(node.inputs)
    regions = [_Region(members, producers) for members in groups.groups()]
    read_by_regions = {p for r in regions for p in r.param_roots}
    for region in regions:
        region.finish(lambda v: v in needed_top or v in read_by_regions)
    regions = [r for r in regions if r.node is not None]  # all results unused: pure, dropped
    units: list[tuple[int, Node, list[Value]]] = []
    effectful = sorted((n for n in kept if has_effects(n)), key=order.get)
    after = dict(zip(effectful[1:], effectful))  # the effect that must run first
    for node in kept:
        deps = list(node.inputs) + (list(after[node].outputs) if node in after else [])
        units.append((order[node], node, deps))
    for r in regions:
        units.append((min(order[m] for m in r.members), r.node, r.param_roots))
    return graph.with_nodes(_topological(units))


def _topological(units) -> list[Node]:
    """Kahn's order; among ready units the earliest original position goes first.  An
    effectful unit lists the previous one's outputs among its dependencies (`_rebuild`),
    so effects keep their program order even when one reads a region."""
    defined_by = {v: u[1] for u in units for v in u[1].outputs}
    waiting = {u[1]: {defined_by[v] for v in u[2] if v in defined_by} for u in units}
    users: dict[Node, list] = {}
    for u in units:
        for dep in waiting[u[1]]:
            users.setdefault(dep, []).append(u)
    ready = [(u[0], id(u[1]), u[1]) for u in units if not waiting[u[1]]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, node = heapq.heappop(ready)
        out.append(node)
        for u in users.get(node, []):
            waiting[u[1]].discard(node)
            if not waiting[u[1]]:
                heapq.heappush(ready, (u[0], id(u[1]), u[1]))
    if len(out) != len(units):
        raise AssertionError("fuse produced a cyclic region graph")  # _creates_cycle failed
    return out


class _Region:
    """One group turned into a body graph; `finish` picks its results and builds the node."""

    def __init__(self, members: list[Node], producers: dict):
        self.members = members
        self.domain = region_domain(members, producers)
        self.producers = producers
        inside = set(members)
        self.env: dict[Value, Value] = {}
        self.params: list[Value] = []
        self.param_roots: list[Value] = []
        self.nodes: list[Node] = []
        for node in members:
            inputs = [self._resolve(v, inside) for v in node.inputs]
            outputs = [Value(v.type) for v in node.outputs]
            self.nodes.append(Node(node.op, inputs, node.attrs, outputs))
            self.env.update(zip(node.outputs, outputs))
        self.node: Optional[Node] = None

    def _resolve(self, v: Value, inside: set) -> Value:
        if v in self.env:
            return self.env[v]
        node = self.producers.get(v)
        if node is not None and node not in inside and is_free(node):
            operands = [self._resolve(x, inside) for x in node.inputs]
            out = Value(v.type)
            self.nodes.append(Node(node.op, operands, node.attrs, [out]))
            self.env[v] = out
            return out
        param = Value(v.type)
        self.params.append(param)
        self.param_roots.append(v)
        self.env[v] = param
        return param

    def finish(self, needed) -> None:
        results = [v for m in self.members for v in m.outputs if needed(v)]
        if not results:
            return
        body = Graph("body", self.params, self.nodes, [self.env[v] for v in results])
        self.node = Node(lookup("fused"), list(self.param_roots), {"kind": self.domain.kind},
                         results, body)
