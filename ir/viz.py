"""Pictures of graphs: an ir.Graph as Graphviz DOT, rendered to SVG/PNG when Graphviz is here.

Owns: `graph_to_dot` (one graph: inputs, nodes, outputs; a `fused` node's body drawn as
a cluster of its own ops; the memory plan as a timeline of arena slots), `graphs_to_dot`
(several graphs joined by the graph breaks between them, for explain()), `render`
(DOT text -> .svg/.png/.pdf through the `graphviz` package and its `dot` program, or
the .dot text itself when either is missing) and the command line:

    python -m ir.viz in.rir -o out.svg [--passes=fuse,plan_memory]

The picture is made from the same objects the printer prints, so what it shows is the
IR, not a second description of it.  Spec: spec/ir.md, "Pictures".
"""

from __future__ import annotations

import argparse
import html
import shutil
import sys
from pathlib import Path
from typing import Optional

from ir.graph import Graph, Value
from ir.printer import Namer

# Colours by op category, so a region's kind reads at a glance.
_FILL = {"pointwise": "#dbeafe", "reduction": "#fde68a", "layout": "#e5e7eb",
         "extern": "#fecaca", "creation": "#dcfce7", "fused": "#f5f5f4"}


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _category(node) -> str:
    cat = getattr(node.op, "category", "")
    return getattr(cat, "value", None) or str(cat).lower()


def _node_label(node, namer: Namer) -> str:
    results = ", ".join("%" + namer.define(v) for v in node.outputs)
    attrs = ", ".join(f"{k}={v}" for k, v in node.attrs.items()
                      if k != "kind" and not isinstance(v, (list, tuple)) or
                      (isinstance(v, (list, tuple)) and len(v) <= 4))
    types = ", ".join(str(v.type) for v in node.outputs)
    head = node.op.name if node.op.name != "fused" else f"fused {node.attrs.get('kind', '')}"
    return f"{results} = {head}" + (f"\\n{{{attrs}}}" if attrs else "") + f"\\n{types}"


class _Dot:
    """Builds one DOT digraph; node ids are unique across the graphs drawn into it."""

    def __init__(self, title: str):
        self.lines = [f'digraph "{_esc(title)}" {{', "  rankdir=TB;",
                      '  node [fontname="Helvetica", fontsize=10];',
                      '  edge [fontname="Helvetica", fontsize=9];']
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def add(self, line: str, indent: int = 1) -> None:
        self.lines.append("  " * indent + line)

    def text(self) -> str:
        return "\n".join(self.lines + ["}"]) + "\n"


def _draw_graph(dot: _Dot, graph: Graph, prefix: str, indent: int,
                show_plan: bool) -> tuple[list[str], list[str]]:
    """Draw `graph` into `dot`; return the DOT ids of its input and output markers."""
    namer = Namer()
    where: dict[Value, str] = {}  # value -> DOT id of what produces it
    input_ids = []
    for v in graph.inputs:
        nid = dot.fresh(prefix + "in")
        dot.add(f'{nid} [shape=ellipse, style=filled, fillcolor="#ffffff", '
                f'label="%{_esc(namer.define(v))}\\n{_esc(str(v.type))}"];', indent)
        where[v] = nid
        input_ids.append(nid)
    for node in graph.nodes:
        if node.body is not None:
            _draw_region(dot, node, namer, where, prefix, indent)
            continue
        nid = dot.fresh(prefix + "n")
        fill = _FILL.get(_category(node), "#ffffff")
        dot.add(f'{nid} [shape=box, style="rounded,filled", fillcolor="{fill}", '
                f'label="{_esc(_node_label(node, namer))}"];', indent)
        for v in node.inputs:
            if v in where:
                dot.add(f"{where[v]} -> {nid};", indent)
        for v in node.outputs:
            where[v] = nid
    output_ids = []
    for i, v in enumerate(graph.outputs):
        nid = dot.fresh(prefix + "out")
        dot.add(f'{nid} [shape=doublecircle, label="out {i}", fontsize=9];', indent)
        if v in where:
            dot.add(f"{where[v]} -> {nid};", indent)
        output_ids.append(nid)
    if show_plan and graph.plan is not None:
        _draw_plan(dot, graph, namer, prefix, indent)
    return input_ids, output_ids


def _draw_region(dot: _Dot, node, namer: Namer, where: dict, prefix: str,
                 indent: int) -> None:
    """A fused node: a cluster holding its body's ops; body inputs are the outer operands."""
    cluster = dot.fresh("cluster_" + prefix)
    kind = node.attrs.get("kind", "")
    results = ", ".join("%" + namer.define(v) for v in node.outputs)
    dot.add(f"subgraph {cluster} {{", indent)
    dot.add(f'label="{_esc(results)} = fused {_esc(str(kind))} (one kernel)"; '
            f'style="rounded,filled"; fillcolor="{_FILL["fused"]}"; fontsize=10;', indent + 1)
    inner: dict[Value, str] = {}
    for outer, v in zip(node.inputs, node.body.inputs):
        namer.define(v)
        if outer in where:
            inner[v] = where[outer]
    outside = set(inner.values())
    # An edge statement inside a subgraph pulls both ends into it, so edges from outside
    # the region are written after the cluster closes.
    incoming = []
    last = None
    for body_node in node.body.nodes:
        nid = dot.fresh(prefix + "f")
        fill = _FILL.get(_category(body_node), "#ffffff")
        dot.add(f'{nid} [shape=box, style="rounded,filled", fillcolor="{fill}", '
                f'label="{_esc(_node_label(body_node, namer))}"];', indent + 1)
        for v in body_node.inputs:
            if v in inner:
                if inner[v] in outside:
                    incoming.append(f"{inner[v]} -> {nid};")
                else:
                    dot.add(f"{inner[v]} -> {nid};", indent + 1)
        for v in body_node.outputs:
            inner[v] = nid
        last = nid
    dot.add("}", indent)
    for edge in incoming:
        dot.add(edge, indent)
    for outer_out, body_out in zip(node.outputs, node.body.outputs):
        where[outer_out] = inner.get(body_out, last)


def _draw_plan(dot: _Dot, graph: Graph, namer: Namer, prefix: str, indent: int) -> None:
    """The memory plan as a timeline: one row per arena slot, a bar over its live steps."""
    plan = graph.plan
    steps = max((s.live[1] for s in plan.slots), default=0) + 1
    rows = [f'<tr><td><b>arena {html.escape(str(plan.arena_bytes()))} B</b></td>'
            + "".join(f"<td>{i}</td>" for i in range(steps)) + "</tr>"]
    for slot in plan.slots:
        name = html.escape("%" + namer[slot.value].lstrip("%") if slot.value in namer.names
                           else "%?")
        where = html.escape(f"@{slot.offset}+{slot.size}")
        reuse = " (in place)" if slot.reuses is not None else ""
        cells = "".join(
            f'<td bgcolor="{"#93c5fd" if slot.live[0] <= i <= slot.live[1] else "#ffffff"}">'
            f"</td>" for i in range(steps))
        rows.append(f"<tr><td>{name} {where}{reuse}</td>{cells}</tr>")
    nid = dot.fresh(prefix + "plan")
    dot.add(f'{nid} [shape=plaintext, label=<<table border="0" cellborder="1" '
            f'cellspacing="0">{"".join(rows)}</table>>];', indent)


def graph_to_dot(graph: Graph, *, show_plan: bool = True) -> str:
    """DOT text for one graph (fused regions as clusters; the plan as a timeline)."""
    dot = _Dot(graph.name)
    _draw_graph(dot, graph, "g", 1, show_plan)
    return dot.text()


def graphs_to_dot(graphs: list[Graph], breaks: list[str], *, title: str = "frame",
                  show_plan: bool = False) -> str:
    """DOT text for the graphs of one frame in order, each a cluster, joined by a node
    per graph break (`breaks[i]` is the reason between graph i and graph i + 1)."""
    dot = _Dot(title)
    previous_outputs: list[str] = []
    for i, graph in enumerate(graphs):
        dot.add(f"subgraph cluster_graph{i} {{")
        dot.add(f'label="graph {i + 1}: {_esc(graph.name)}"; style=rounded; fontsize=12;', 2)
        inputs, outputs = _draw_graph(dot, graph, f"g{i}_", 2, show_plan)
        dot.add("}")
        if i > 0 and i - 1 < len(breaks):
            bid = dot.fresh("break")
            dot.add(f'{bid} [shape=octagon, style=filled, fillcolor="#fca5a5", '
                    f'label="graph break\\n{_esc(breaks[i - 1])}"];')
            for o in previous_outputs[:1]:
                dot.add(f"{o} -> {bid} [style=dashed];")
            for n in inputs[:1]:
                dot.add(f"{bid} -> {n} [style=dashed];")
        previous_outputs = outputs
    for extra in breaks[max(len(graphs) - 1, 0):]:  # breaks with no graph after them
        bid = dot.fresh("break")
        dot.add(f'{bid} [shape=octagon, style=filled, fillcolor="#fca5a5", '
                f'label="graph break\\n{_esc(extra)}"];')
    return dot.text()


def graphviz_available() -> bool:
    """Whether rendering to images works here: the `graphviz` package and `dot` program."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


def render(dot_text: str, path: str | Path) -> Path:
    """Write the picture to `path` (format from its suffix: .svg, .png, .pdf or .dot).

    Without Graphviz (the `graphviz` package and its `dot` program) an image cannot be
    made: the DOT text is written to `path` with the suffix `.dot` instead, and that
    path is returned, so the caller can say where the picture's source is."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("svg", "png", "pdf", "dot"):
        raise ValueError(f"unknown picture format {path.suffix!r}: use .svg, .png, .pdf "
                         "or .dot")
    if fmt == "dot" or not graphviz_available():
        out = path.with_suffix(".dot")
        out.write_text(dot_text)
        return out
    import graphviz

    data = graphviz.Source(dot_text).pipe(format=fmt)
    path.write_bytes(data)
    return path


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ir.viz", description=__doc__.split("\n")[0])
    ap.add_argument("input", help="a textual IR file (.rir), or - for standard input")
    ap.add_argument("-o", "--output", required=True, help="out.svg, out.png, out.pdf or out.dot")
    ap.add_argument("--passes", default="",
                    help="passes to run first, e.g. decompose,fuse,plan_memory")
    ap.add_argument("--no-plan", action="store_true", help="leave the memory plan out")
    args = ap.parse_args(argv)
    from ir.parser import ParseError, parse

    text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text()
    try:
        graph = parse(text)
    except ParseError as e:
        print(f"{args.input}: {e}", file=sys.stderr)
        return 1
    if args.passes:
        from ir.passes.manager import run_pipeline

        graph = run_pipeline(graph, [p for p in args.passes.split(",") if p])
    out = render(graph_to_dot(graph, show_plan=not args.no_plan), args.output)
    if out != Path(args.output):
        print(f"graphviz is not installed: wrote the DOT text to {out}", file=sys.stderr)
    else:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
