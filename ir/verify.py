"""The verifier: every violation of the IR's invariants, each quoting its IR line.

Checks: values defined once and before use (a body sees only its own parameters);
operand counts; attributes known and present; each node's result types equal its
op's type rule (a fused node's: its body's signature); outputs defined; input names
unique.  Spec: spec/ir.md, "Invariants".
"""

from __future__ import annotations

import collections
import operator
import weakref
from dataclasses import dataclass

from ir.graph import Graph, Node, Value
from ir.ops.registry import FUSED
from ir.printer import print_graph_with_lines


@dataclass(frozen=True)
class Diagnostic:
    message: str
    line: str  # the offending line of textual IR

    def __str__(self) -> str:
        return f"{self.message}\n    {self.line}"


class VerificationError(ValueError):
    def __init__(self, diagnostics: list[Diagnostic], context: str = ""):
        self.diagnostics = diagnostics
        head = f"{context}: " if context else ""
        body = "\n".join(f"  {d}" for d in diagnostics)
        super().__init__(f"{head}invalid IR ({len(diagnostics)} problem(s)):\n{body}")


def verify(graph: Graph) -> list[Diagnostic]:
    """All diagnostics for `graph` (an empty list means valid)."""
    out: list[Diagnostic] = []
    _verify_graph(graph, {}, out, f"func @{graph.name}")
    if out:  # name each problem by its printed line (printing costs more than checking)
        _, line_of = print_graph_with_lines(graph)
        out = []
        _verify_graph(graph, line_of, out, f"func @{graph.name}")
    if graph.plan is not None and not out:  # a memory plan must hold (spec/memory.md)
        from ir.plan import check_plan

        out += [Diagnostic(problem, "plan { ... }") for problem in check_plan(graph)]
    return out


def check(graph: Graph, context: str = "") -> Graph:
    """Raise VerificationError if `graph` is invalid; return it otherwise."""
    diagnostics = verify(graph)
    if diagnostics:
        raise VerificationError(diagnostics, context)
    return graph


def _verify_graph(graph: Graph, line_of: dict, out: list, header: str) -> None:
    defined: set[Value] = set()
    names = collections.Counter(v.name for v in graph.inputs if v.name is not None)
    for name in [n for n, count in names.items() if count > 1]:
        out.append(Diagnostic(f"input name %{name} is used twice", header))
    defined.update(graph.inputs)
    for node in graph.nodes:
        line = line_of.get(node, node.op.name)
        for value in node.inputs:
            if value not in defined:
                out.append(Diagnostic(f"operand {value!r} is not defined before use"
                                      " in this scope", line))
        _verify_node(node, line, out)
        if node.body is not None:
            _verify_graph(node.body, line_of, out, line)
        for value in node.outputs:
            if value in defined:
                out.append(Diagnostic(f"value {value!r} is defined twice", line))
            defined.add(value)
    for value in graph.outputs:
        if value not in defined:
            out.append(Diagnostic(f"returned value {value!r} is not defined", header))


# Note [Verified node shapes]: a node's own checks depend only on its op, attrs and the
# types of its operands and results, and a deep model repeats the same few (80 conv blocks
# are one conv, one batch_norm... each checked once).  The verifier runs after every pass
# (spec/passes.md, "Pipelines"), so these checks are memoized by that key; only nodes
# that passed are remembered (a failing node is re-checked, to report it with its line).
_PASSED: dict = {}
_PASSED_LIMIT = 1 << 16
# A pass returns a new graph but keeps the nodes it did not change (most of them): a node
# object that passed is not checked again while it lives.  Passes never mutate their input
# (the pass manager's check_semantics checks it), so a node that passed stays valid.
_PASSED_NODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_TYPE = operator.attrgetter("type")


def _node_key(node: Node):
    op = node.op
    # repr of the attrs: 1, 1.0 and True are three keys (they are equal in Python)
    key = (op.name, id(op), tuple(map(_TYPE, node.inputs)), tuple(map(_TYPE, node.outputs)),
           repr(node.attrs))
    try:
        hash(key)
    except TypeError:  # an unhashable type: not memoized
        return None
    return key


def _verify_node(node: Node, line: str, out: list) -> None:
    if node in _PASSED_NODES:  # this very node passed (passes never change their input)
        return
    if node.body is not None or node.op.category == FUSED:
        before = len(out)
        _check_node(node, line, out)
        if len(out) == before:
            _PASSED_NODES[node] = True
        return
    key = _node_key(node)
    if key is not None and key in _PASSED:
        return
    before = len(out)
    _check_node(node, line, out)
    if key is not None and len(out) == before:
        if len(_PASSED) >= _PASSED_LIMIT:
            _PASSED.clear()
        _PASSED[key] = True
    if len(out) == before:
        _PASSED_NODES[node] = True


def _check_node(node: Node, line: str, out: list) -> None:
    op = node.op
    if not op.variadic and len(node.inputs) != len(op.operands):
        out.append(Diagnostic(f"{op.name} takes {len(op.operands)} operand(s),"
                              f" got {len(node.inputs)}", line))
        return
    try:
        attrs = op.normalize_attrs(node.attrs)
    except ValueError as e:
        out.append(Diagnostic(str(e), line))
        return
    if not op.complex and any(
            v.type.dtype.is_complex for v in list(node.inputs) + list(node.outputs)):
        out.append(Diagnostic(f"{op.name} takes no complex values", line))
        return
    if op.name != "aten" and any(
            v.type.dtype.extern_only for v in list(node.inputs) + list(node.outputs)):
        out.append(Diagnostic(f"{op.name} takes no u16/u32/u64 values", line))
        return
    if op.category == FUSED:
        _verify_fused(node, line, out)
        return
    if node.body is not None:
        out.append(Diagnostic(f"{op.name} cannot have a body", line))
    try:
        inferred = op.infer([v.type for v in node.inputs], **attrs)
    except (TypeError, ValueError) as e:
        out.append(Diagnostic(f"{op.name}: {e}", line))
        return
    inferred = list(inferred) if isinstance(inferred, (list, tuple)) else [inferred]
    declared = [v.type for v in node.outputs]
    if inferred != declared:
        out.append(Diagnostic(f"{op.name} produces {', '.join(map(str, inferred))}"
                              f" but the IR declares {', '.join(map(str, declared))}", line))


def _verify_fused(node: Node, line: str, out: list) -> None:
    body = node.body
    if body is None:
        out.append(Diagnostic("a fused node needs a body", line))
        return
    params = [v.type for v in body.inputs]
    operands = [v.type for v in node.inputs]
    if params != operands:
        out.append(Diagnostic(f"body parameters ({', '.join(map(str, params))}) differ from"
                              f" operands ({', '.join(map(str, operands))})", line))
    results = [v.type for v in body.outputs]
    declared = [v.type for v in node.outputs]
    if results != declared:
        out.append(Diagnostic(f"body returns ({', '.join(map(str, results))}) but the node"
                              f" declares ({', '.join(map(str, declared))})", line))
