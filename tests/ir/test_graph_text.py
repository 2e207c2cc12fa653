"""Graphs: build, print, parse back, verify, run (spec/ir.md)."""

import numpy as np
import pytest
from hypothesis import given

from ir import GraphBuilder, ParseError, TensorType, check, parse, print_graph, run, verify
from ir.types import f32, i64, size_symbol
from tests.strategies import graphs


def _structure(g):
    """A comparable summary of a graph: what `parse(print(g))` must reproduce."""
    index = {v: i for i, v in enumerate(g.values())}
    rows = [(g.name, [(v.name, v.type) for v in g.inputs])]
    for node in g.nodes:
        body = _structure(node.body) if node.body is not None else None
        rows.append((node.op.name, [index[v] for v in node.inputs], repr(node.attrs),
                     [v.type for v in node.outputs], body))
    rows.append([index[v] for v in g.outputs])
    return rows


@given(graphs())
def test_print_parse_round_trip(case):
    g, _ = case
    text = print_graph(g)
    again = parse(text)
    assert print_graph(again) == text
    assert _structure(again) == _structure(g)


@given(graphs())
def test_random_graphs_verify_and_run(case):
    g, args = case
    assert verify(g) == []
    outs = run(g, args)
    assert [o.dtype for o in outs] == [v.type.dtype.np for v in g.outputs]
    assert [o.shape for o in outs] == [tuple(v.type.shape) for v in g.outputs]


def test_symbolic_sizes_print_and_run():
    s0 = size_symbol("s0")
    b = GraphBuilder()
    x = b.input("x", TensorType(f32, (s0, 16)))
    y = b.sum(b.mul(x, 2.0), dims=[1], keepdim=True)
    g = b.build([b.div(x, y)])
    text = print_graph(g)
    assert "func @forward(%x: f32[s0,16]) -> f32[s0,16]" in text
    assert "expand %" in text and "{shape=[s0,16]}" in text
    assert print_graph(parse(text)) == text
    for n in (1, 5):
        (out,) = run(g, [np.ones((n, 16), np.float32)])
        np.testing.assert_allclose(out, np.full((n, 16), 1 / 32, np.float32))


@pytest.mark.parametrize("text, line, col, message", [
    ("func @f(%x: f32[4]) -> f32[4] {\n  %0 = frob %x : f32[4]\n  return %0\n}", 2, 8,
     "unknown op 'frob'"),
    ("func @f(%x: f32[4]) -> f32[4] {\n  %0 = add %x, %y : f32[4]\n  return %0\n}", 2, 16,
     "%y is used before it is defined"),
    ("func @f(%x: f33[4]) -> f32[4] {\n  return %x\n}", 1, 13, "unknown dtype 'f33'"),
    ("func @f(%x: f32[4]) -> f32[4] {\n  %0 = sum %x {dimz=[0]} : f32[]\n  return %0\n}", 2, 16,
     "has no attribute 'dimz'"),
    ("func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x : f32[4]\n", 3, 1,
     "expected 'return'"),
    ("func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x ; f32[4]\n  return %0\n}", 2, 15,
     "unexpected character ';'"),
])
def test_parse_errors_name_line_and_column(text, line, col, message):
    with pytest.raises(ParseError) as info:
        parse(text)
    err = info.value
    assert (err.line, err.col) == (line, col)
    assert message in str(err)


def test_verifier_reports_every_violation_with_its_line():
    text = ("func @f(%x: f32[4], %i: i64[4]) -> f32[4] {\n"
            "  %0 = add %x, %x : f32[5]\n"
            "  %1 = exp %i : i64[4]\n"
            "  %2 = add %x, %i : f32[4]\n"
            "  return %2\n}")
    diagnostics = verify(parse(text))
    assert len(diagnostics) == 2
    assert "add produces f32[4] but the IR declares f32[5]" in diagnostics[0].message
    assert diagnostics[0].line == "%0 = add %x, %x : f32[5]"
    assert "exp produces f32[4]" in diagnostics[1].message
    with pytest.raises(ValueError, match="invalid IR"):
        check(parse(text))


def test_verifier_rejects_mismatched_shapes():
    b = GraphBuilder()
    x = b.input("x", TensorType(f32, (4,)))
    y = b.input("y", TensorType(f32, (3,)))
    with pytest.raises(TypeError, match="do not broadcast"):
        b.add(x, y)


def test_fused_region_round_trips_and_runs():
    text = """func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[]) {
  %0, %1 = fused %x, %y {kind="pointwise"} : f32[4], f32[] {
  ^(%a: f32[4], %b: f32[4]):
    %2 = mul %a, %b : f32[4]
    %3 = sum %2 : f32[]
    return %2, %3
  }
  return %0, %1
}
"""
    g = parse(text)
    assert verify(g) == [] and print_graph(g) == text
    prod, total = run(g, [np.arange(4), np.ones(4)])
    assert total == 6.0 and prod.tolist() == [0, 1, 2, 3]


def test_fused_body_cannot_read_outer_values():
    text = """func @f(%x: f32[4]) -> f32[4] {
  %0 = fused %x : f32[4] {
  ^(%a: f32[4]):
    %1 = add %a, %x : f32[4]
    return %1
  }
  return %0
}
"""
    with pytest.raises(ParseError, match="%x is used before it is defined"):
        parse(text)


def test_weak_scalars_follow_torch_promotion():
    b = GraphBuilder()
    xi = b.input("i", TensorType(i64, (3,)))
    assert b.add(xi, 1).type.dtype == i64
    assert b.add(xi, 1.5).type.dtype == f32
    xf = b.input("h", TensorType(f32, (3,)))
    assert b.mul(xf, 2).type.dtype == f32
