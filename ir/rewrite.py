"""The rewrite engine: passes written as tables of small named rules, not as loops.

Owns: `Rule`, `RuleTable`, `Rewriter` (what a rule sees), `rewrite` (the one
replacement loop of ir/), `RewriteError`, and the per-run counts of fired rules
(`collect`, read by the pass manager and `python -m ir.opt --stats`).  Must not
know any particular rule.  Spec: spec/passes.md, "Writing a new pass" (an example pass,
what a rule may use, and Note [The engine]: use replacement, effects, the fixed point).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

from ir.builder import GraphBuilder
from ir.facts import has_effects, splat_value
from ir.graph import Graph, Node, Value
from ir.ops.registry import lookup
from ir.printer import print_graph_with_lines

MAX_DEPTH = 32  # rules applied to the output of rules, nested, for one original node
DEFAULT_MAX_SWEEPS = 8

class RewriteError(RuntimeError):
    """A rule table that does not terminate, or a rule that broke the engine's contract."""


@dataclass(frozen=True)
class Rule:
    """One named rewrite of nodes whose op is in `ops`.

    `fn(node, rw)`; or, with `unpack`, `fn(b, *operands, **attrs)`: a rule written as the
    math it computes with the builder `b` at the node's place (decompositions).
    """

    name: str
    ops: tuple[str, ...]
    fn: Callable
    unpack: bool = False

    def apply(self, node: Node, rw: "Rewriter"):
        if self.unpack:
            return self.fn(rw.builder, *node.inputs, **node.attrs)
        return self.fn(node, rw)

    @property
    def algebra(self) -> str:
        """The first line of the rule's docstring: what it rewrites into what."""
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


class RuleTable:
    """Named rules keyed by op name, tried in the order they were added.

    Calling a table runs it: a table is a pass `Graph -> Graph`, so
    `register_pass("simplify")(SIMPLIFY)` registers it.
    """

    def __init__(self, name: str, *, max_sweeps: int = DEFAULT_MAX_SWEEPS, doc: str = ""):
        self.name = name
        self.max_sweeps = max_sweeps
        self.rules: list[Rule] = []
        self._by_op: dict[str, list[Rule]] = {}
        self.__name__ = name
        self.__doc__ = doc

    def rule(self, *ops: str, name: Optional[str] = None, unpack: bool = False):
        """Decorator: add `fn` as a rule for nodes of the ops named (see `Rule`)."""
        if not ops:
            raise ValueError(f"{self.name}: a rule names the op(s) it matches")

        def add(fn: Callable) -> Callable:
            self.add(Rule(name or fn.__name__, tuple(ops), fn, unpack))
            return fn
        return add

    def add(self, rule: Rule) -> Rule:
        if any(r.name == rule.name for r in self.rules):
            raise ValueError(f"{self.name}: rule {rule.name!r} is defined twice")
        self.rules.append(rule)
        for op in rule.ops:
            self._by_op.setdefault(op, []).append(rule)
        return rule

    def for_op(self, op_name: str) -> list[Rule]:
        return self._by_op.get(op_name, [])

    def ops(self) -> set[str]:
        """The op names some rule matches."""
        return set(self._by_op)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def rewrite(self, g: Graph) -> Graph:
        return rewrite(g, self)

    __call__ = rewrite

    def __repr__(self) -> str:
        return f"RuleTable({self.name!r}, {len(self.rules)} rules)"


class Rewriter:
    """What a rule sees: the builder at the node's place, producers, splat constants."""

    def __init__(self, builder: GraphBuilder, producers: dict[Value, Node], context=None):
        self.builder = builder  # its op methods (`rw.builder.exp(x)`) emit here too
        self.producers = producers
        self.context = context  # what the pass computed once for its rules (`rewrite`)
        self._splats: dict[Value, object] = {}  # a big `constant` is scanned once

    def producer(self, value: Value, op: Optional[str] = None) -> Optional[Node]:
        """The node defining `value` (if it is an `op` node, when op is given), else None."""
        node = self.producers.get(value)
        if node is None or (op is not None and node.op.name != op):
            return None
        return node

    def splat(self, value: Value):
        """The scalar all of `value`'s elements equal, if the IR says so plainly, else None."""
        if value not in self._splats:
            self._splats[value] = splat_value(value, self.producers)
        return self._splats[value]

    def emit(self, op: str, inputs: Sequence[Value], **attrs):
        """A new node `op(inputs, attrs)` at the rewritten node's place; its result(s)."""
        return self.builder.insert(lookup(op), list(inputs), attrs)

    def as_type_of(self, x: Value, out: Value) -> Optional[Value]:
        """x itself if it has out's type, `cast x` if only the dtype differs, else None."""
        if x.type == out.type:
            return x
        if x.type.shape == out.type.shape and x.type.device == out.type.device:
            return self.emit("cast", [x], dtype=out.type.dtype)
        return None


# --- counts and provenance --------------------------------------------------------------------
@dataclass(frozen=True)
class Firing:
    """Provenance of one rewrite: which rule replaced which node, by what value."""

    rule: str
    node: Node  # the node as the rule saw it (operands already replaced)
    result: tuple[Value, ...]


@dataclass
class RewriteStats:
    """What one or more runs of rule tables did: fired rules counted by name, in order."""

    counts: dict[str, int] = field(default_factory=dict)
    firings: list[Firing] = field(default_factory=list)
    sweeps: int = 0

    def add(self, firing: Firing) -> None:
        self.counts[firing.rule] = self.counts.get(firing.rule, 0) + 1
        self.firings.append(firing)

    def total(self) -> int:
        return sum(self.counts.values())

    def provenance(self, before: Graph) -> list[str]:
        """One line per firing, `rule: <the node it rewrote, as printed in before>`.

        `before` is the graph the pass was given; a node that an earlier rule of the
        same run made is not in it, and is named by its op.
        """
        _, line_of = print_graph_with_lines(before)
        printed = {out: line_of[node].strip() for node in before.nodes for out in node.outputs}
        lines = []
        for f in self.firings:
            line = printed.get(f.node.outputs[0])
            lines.append(f"{f.rule}: {line}" if line is not None else
                         f"{f.rule}: a {f.node.op.name} that a rule made")
        return lines

    def summary(self) -> str:
        """`rule xN, ...` by count, most frequent first; `no rewrites` when none fired."""
        if not self.counts:
            return "no rewrites"
        ranked = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join(f"{name} x{n}" for name, n in ranked)


_collectors: list[RewriteStats] = []


class collect:
    """`with collect() as stats:` counts every rule fired by `rewrite` inside the block.

    The pass manager wraps each pass in one, so a pass written on the engine reports
    its rules without code of its own.  Collectors nest: each one sees every firing.
    """

    def __enter__(self) -> RewriteStats:
        self.stats = RewriteStats()
        _collectors.append(self.stats)
        return self.stats

    def __exit__(self, *exc) -> None:
        _collectors.remove(self.stats)


# --- the engine -------------------------------------------------------------------------------
def rewrite(g: Graph, table: RuleTable, *, context=None,
            max_sweeps: Optional[int] = None) -> Graph:
    """Apply `table` to `g` until no rule fires (Note [The engine]); a new graph.

    `context` is handed to every rule as `rw.context`: facts about the whole input
    graph that a pass computes once (its constants, its use counts).  Returns `g`
    itself when nothing fired.  Raises RewriteError when the table does not reach a
    fixed point within `max_sweeps` sweeps (default: the table's).
    """
    bound = table.max_sweeps if max_sweeps is None else max_sweeps
    stats = RewriteStats()
    wanted = table._by_op
    for sweep in range(bound):
        if sweep > 0 and not any(node.op.name in wanted for node in g.nodes):
            break  # no node any rule could match: the fixed point, without a sweep
        g, fired = _Sweep(g, table, stats, context).run()
        stats.sweeps += 1
        if not fired:
            break
    else:
        last = ", ".join(f.rule for f in stats.firings[-5:])
        raise RewriteError(f"{table.name} did not reach a fixed point on @{g.name} in {bound}"
                           f" sweeps; last rules fired: {last}")
    for collector in _collectors:
        collector.sweeps += stats.sweeps
        for firing in stats.firings:
            collector.add(firing)
    return g


class _Sweep:
    """One pass over a graph's nodes in order, rewriting with `table` (use replacement)."""

    def __init__(self, g: Graph, table: RuleTable, stats: RewriteStats, context=None):
        self.g = g
        self.table = table
        self.stats = stats
        self.builder = GraphBuilder(g.name)
        self.builder.inputs = list(g.inputs)
        self.producers: dict[Value, Node] = {}
        self.rw = Rewriter(self.builder, self.producers, context)
        self.replace: dict[Value, Value] = {}
        self.by_op = table._by_op
        self.fired = 0

    def run(self) -> tuple[Graph, int]:
        for node in self.g.nodes:
            self.visit(node, 0)
        if not self.fired:
            return self.g, 0
        outputs = [self.replace.get(v, v) for v in self.g.outputs]
        return self.g.with_nodes(self.builder.nodes, outputs), self.fired

    def visit(self, node: Node, depth: int) -> None:
        replace = self.replace
        inputs = [replace.get(v, v) for v in node.inputs]
        if inputs != node.inputs:
            node = Node(node.op, inputs, node.attrs, node.outputs, node.body)
        rules = self.by_op.get(node.op.name)
        if rules and node.body is None and not has_effects(node):
            if depth > MAX_DEPTH:
                raise RewriteError(f"{self.table.name}: rules keep rewriting what rules made"
                                   f" ({node.op.name}, {MAX_DEPTH} levels deep)")
            for rule in rules:
                if self._try(rule, node, depth):
                    return
        self.builder.nodes.append(node)
        for out in node.outputs:
            self.producers[out] = node

    def _try(self, rule: Rule, node: Node, depth: int) -> bool:
        nodes = self.builder.nodes
        start = len(nodes)
        result = rule.apply(node, self.rw)
        emitted = nodes[start:]
        del nodes[start:]  # a rule that declines leaves nothing behind
        if result is None:
            return False
        results = (result,) if isinstance(result, Value) else tuple(result)
        if len(results) != len(node.outputs) or any(
                r.type != o.type for r, o in zip(results, node.outputs)):
            got = ", ".join(str(r.type) for r in results)
            want = ", ".join(str(o.type) for o in node.outputs)
            raise RewriteError(f"{self.table.name} rule {rule.name} replaced {node.op.name}"
                               f" ({want}) by a value of another type ({got})")
        if any(r is o for r, o in zip(results, node.outputs)):
            raise RewriteError(f"{self.table.name} rule {rule.name} returned the node's own"
                               " result: return None to decline")
        # What the rule made is rewritten before the sweep goes on.  Its operands are final
        # unless an earlier node of the batch was replaced, and a node of an op no rule
        # matches is kept as it is: those two checks keep decompositions cheap.
        mark = len(self.replace)
        for new in emitted:
            if new.op.name in self.by_op or len(self.replace) != mark:
                self.visit(new, depth + 1)
                continue
            nodes.append(new)
            for out in new.outputs:
                self.producers[out] = new
        for out, r in zip(node.outputs, results):
            self.replace[out] = self.replace.get(r, r)
        self.fired += 1
        self.stats.add(Firing(rule.name, node, results))
        return True
