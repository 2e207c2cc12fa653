"""The printer: a Graph as its one canonical text.  Spec: spec/ir.md, "Text format".

    func @forward(%x: f32[s0,16], %w: f32[16,16]) -> f32[s0,16] {
      %0 = matmul %x, %w : f32[s0,16]
      %1 = sum %0 {dims=[1], keepdim=true} : f32[s0,1]
      return %1
    }

Attributes equal to their default are omitted.  Values without a name hint are
numbered in order of definition; the parser reads the text back to an equal graph.
"""

from __future__ import annotations

import json
import math
import re

from ir.graph import Graph, Node, Value
from ir.types import DType, dim_str

_NAME_OK = re.compile(r"^[A-Za-z0-9_.]+$")


class Namer:
    """Assigns each value a unique printed name: its hint if free, else the next number."""

    def __init__(self):
        self.names: dict[Value, str] = {}
        self.used: set[str] = set()
        self.counter = 0

    def define(self, value: Value) -> str:
        name = value.name
        if name is None or not _NAME_OK.match(name) or name.isdigit() or name in self.used:
            base = name if name and _NAME_OK.match(name) and not name.isdigit() else None
            name = self._fresh(base)
        self.used.add(name)
        self.names[value] = name
        return name

    def _fresh(self, base) -> str:
        if base is not None:
            k = 1
            while f"{base}_{k}" in self.used:
                k += 1
            return f"{base}_{k}"
        while str(self.counter) in self.used:
            self.counter += 1
        name = str(self.counter)
        self.counter += 1
        return name

    def __getitem__(self, value: Value) -> str:
        try:
            return "%" + self.names[value]
        except KeyError:
            return f"%<undefined v{value.id}>"


def format_attr(value, kind: str) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, DType):
        return value.short
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_attr(v, kind) for v in value) + "]"
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return format_attr(value.tolist(), kind)
    if isinstance(value, int):
        return str(value)
    return dim_str(value)  # a sympy expression


def _format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = repr(x)
    return text if any(c in text for c in ".en") else text + ".0"


def format_attrs(node: Node) -> str:
    parts = []
    for name, spec in node.op.attrs.items():
        value = node.attrs.get(name)
        if not spec.required and _equal_default(value, spec.default):
            continue
        parts.append(f"{name}={format_attr(value, spec.kind)}")
    return " {" + ", ".join(parts) + "}" if parts else ""


def _equal_default(value, default) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return type(value) is type(default) and value == default


def _types(values) -> str:
    return ", ".join(str(v.type) for v in values)


def _print_body(graph: Graph, namer: Namer, indent: str, lines: list, line_of: dict):
    for node in graph.nodes:
        operands = ", ".join(namer[v] for v in node.inputs)
        results = ", ".join("%" + namer.define(v) for v in node.outputs)
        text = f"{results} = {node.op.name}"
        if operands:
            text += " " + operands
        text += format_attrs(node) + " : " + _types(node.outputs)
        if node.body is None:
            lines.append(indent + text)
            line_of[node] = text
            continue
        params = ", ".join(f"%{namer.define(v)}: {v.type}" for v in node.body.inputs)
        lines.append(indent + text + " {")
        line_of[node] = text + " {...}"
        lines.append(f"{indent}^({params}):")
        _print_body(node.body, namer, indent + "  ", lines, line_of)
        lines.append(indent + "}")
    lines.append(indent + "return " + ", ".join(namer[v] for v in graph.outputs))


def print_graph_with_lines(graph: Graph) -> tuple[str, dict[Node, str]]:
    """The text and, for each node (nested ones too), its own line (for diagnostics)."""
    namer = Namer()
    params = ", ".join(f"%{namer.define(v)}: {v.type}" for v in graph.inputs)
    results = _types(graph.outputs)
    if len(graph.outputs) != 1:
        results = f"({results})"
    lines = [f"func @{graph.name}({params}) -> {results} {{"]
    line_of: dict[Node, str] = {}
    _print_body(graph, namer, "  ", lines, line_of)
    lines.append("}")
    if graph.plan is not None:  # the memory plan section (spec/memory.md, ir/plan.py)
        lines += graph.plan.format(lambda v: namer[v])
    return "\n".join(lines) + "\n", line_of


def print_graph(graph: Graph) -> str:
    return print_graph_with_lines(graph)[0]


def value_names(graph: Graph) -> dict[Value, str]:
    """The printed name (`%3`, `%x`) of every value, as `print_graph` numbers them."""
    namer = Namer()
    for v in graph.inputs:
        namer.define(v)

    def walk(g: Graph) -> None:
        for node in g.nodes:
            for v in node.outputs:
                namer.define(v)
            if node.body is not None:
                for v in node.body.inputs:
                    namer.define(v)
                walk(node.body)
    walk(graph)
    return {v: namer[v] for v in namer.names}
