"""ir/viz.py: graphs as DOT, fused regions as clusters, the plan as a timeline, rendering
with Graphviz when it is here and DOT text otherwise (spec/ir.md, "Pictures")."""

import re

import pytest

from ir import viz
from ir.parser import parse
from ir.passes.manager import run_pipeline

CHAIN = """
func @chain(%x: f32[8,16], %w: f32[16,16]) -> f32[8,16] {
  %0 = matmul %x, %w : f32[8,16]
  %1 = relu %0 : f32[8,16]
  %2 = tanh %1 : f32[8,16]
  %3 = add %2, %x : f32[8,16]
  return %3
}
"""


def fused_chain():
    return run_pipeline(parse(CHAIN), ["fuse", "plan_memory"])


def clusters(dot: str) -> dict:
    """cluster id -> the text between its braces (clusters here do not nest)."""
    out = {}
    for m in re.finditer(r"subgraph (cluster_\w+) \{(.*?)\n\s*\}", dot, re.S):
        out[m.group(1)] = m.group(2)
    return out


def test_unfused_graph_has_every_node_and_edge():
    dot = viz.graph_to_dot(parse(CHAIN))
    assert dot.startswith('digraph "chain" {') and dot.rstrip().endswith("}")
    for op in ("matmul", "relu", "tanh", "add"):
        assert f"= {op}" in dot
    assert "%x\\nf32[8,16]" in dot and "%w\\nf32[16,16]" in dot
    assert len(re.findall(r" -> ", dot)) == 2 + 1 + 1 + 2 + 1   # operands + the output
    assert "subgraph" not in dot


def test_fused_region_is_one_cluster_holding_its_body():
    g = fused_chain()
    (fused,) = [n for n in g.nodes if n.op.name == "fused"]
    dot = viz.graph_to_dot(g, show_plan=False)
    (body,) = clusters(dot).values()
    assert "fused pointwise (one kernel)" in body
    body_ops = [n.op.name for n in fused.body.nodes]
    for op in body_ops:
        assert f"= {op}" in body
    assert "= matmul" not in body                      # the extern stays outside
    # edges into the region are declared outside it (else Graphviz pulls their
    # sources, the matmul and the input %x, into the cluster)
    outside = re.findall(r"(\w+) \[shape=\w+, [^\n]*(?:= matmul|%x\\n)", dot)
    assert len(outside) == 2
    for node_id in outside:
        assert not re.search(rf"\b{node_id}\b", body)
        assert re.search(rf"\b{node_id} -> ", dot)


def test_plan_is_a_timeline_of_slots():
    g = run_pipeline(parse(CHAIN), ["plan_memory"])
    assert g.plan is not None and g.plan.slots
    dot = viz.graph_to_dot(g)
    assert "<table" in dot and f"arena {g.plan.arena_bytes()} B" in dot
    assert dot.count("<tr>") == len(g.plan.slots) + 1
    assert "#93c5fd" in dot                            # live steps are drawn


def test_graph_breaks_join_the_graphs_of_a_frame():
    a, b = parse(CHAIN), parse(CHAIN.replace("@chain", "@after"))
    dot = viz.graphs_to_dot([a, b], ["[RB008] print() at f.py:3"], title="f")
    assert len(clusters(dot)) == 2
    assert 'graph break\\n[RB008] print() at f.py:3' in dot
    assert re.search(r"g0_out\d+ -> break\d+ \[style=dashed\]", dot)
    assert re.search(r"break\d+ -> g1_in\d+ \[style=dashed\]", dot)


def test_render_without_graphviz_writes_dot(tmp_path, monkeypatch):
    monkeypatch.setattr(viz, "graphviz_available", lambda: False)
    out = viz.render(viz.graph_to_dot(parse(CHAIN)), tmp_path / "g.svg")
    assert out == tmp_path / "g.dot" and out.read_text().startswith("digraph")


def test_render_rejects_unknown_formats(tmp_path):
    with pytest.raises(ValueError, match="unknown picture format '.jpeg'"):
        viz.render("digraph g {}", tmp_path / "g.jpeg")


@pytest.mark.skipif(not viz.graphviz_available(), reason="graphviz package or dot missing")
def test_render_svg_with_graphviz(tmp_path):
    out = viz.render(viz.graph_to_dot(fused_chain()), tmp_path / "g.svg")
    text = out.read_text()
    assert out.suffix == ".svg" and "<svg" in text and "fused pointwise" in text


def test_command_line(tmp_path, capsys):
    src = tmp_path / "in.rir"
    src.write_text(CHAIN)
    assert viz.main([str(src), "-o", str(tmp_path / "out.dot"), "--passes=fuse"]) == 0
    assert "fused pointwise" in (tmp_path / "out.dot").read_text()
    src.write_text("func @broken(")
    assert viz.main([str(src), "-o", str(tmp_path / "bad.dot")]) == 1
    assert "in.rir" in capsys.readouterr().err
