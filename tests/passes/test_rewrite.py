"""The rewrite engine (ir/rewrite.py): use replacement, effects, fused nodes, the fixed
point and its bound, counts of fired rules and their provenance."""

from __future__ import annotations

import pytest

from ir import parse, print_graph
from ir.passes.manager import run_pipeline
from ir.rewrite import RewriteError, RuleTable, collect, rewrite


def _double_table():
    table = RuleTable("double")

    @table.rule("mul")
    def mul_by_two(node, rw):
        """x * 2 -> x + x"""
        x, two = node.inputs
        if rw.splat(two) == 2 and x.type == node.output.type:
            return rw.emit("add", [x, x])
        return None
    return table


SOURCE = """func @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %0 = full {value=2.0} : f32[]
  %1 = mul %x, %0 : f32[4]
  %2 = neg %1 : f32[4]
  %3 = mul %x, %x : f32[4]
  return %2, %3
}
"""


def test_a_rule_replaces_every_use_and_declines_quietly():
    out = print_graph(rewrite(parse(SOURCE), _double_table()))
    assert "%1 = add %x, %x : f32[4]" in out and "neg %1" in out  # the use reads the sum
    assert "mul %x, %x" in out  # the rule declined: x * x stays


def test_nothing_fired_returns_the_same_graph():
    g = parse("func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x : f32[4]\n  return %0\n}\n")
    assert rewrite(g, _double_table()) is g


def test_counts_and_provenance_are_collected_and_reported_by_the_manager():
    with collect() as stats:
        rewrite(parse(SOURCE), _double_table())
    assert stats.counts == {"mul_by_two": 1} and stats.summary() == "mul_by_two x1"
    (firing,) = stats.firings
    assert firing.rule == "mul_by_two" and firing.node.op.name == "mul"
    assert firing.result[0].type == firing.node.output.type
    per_pass: dict = {}
    run_pipeline(parse(SOURCE), [_double_table(), "dce"], stats=per_pass)
    assert per_pass["double"].counts == {"mul_by_two": 1} and per_pass["dce"].counts == {}


def test_rules_never_see_effectful_or_fused_nodes():
    seen = []
    table = RuleTable("spy")

    @table.rule("rand", "exp")
    def spy(node, rw):
        """x -> x   (records what it is offered)"""
        seen.append(node.op.name)
        return None

    g = parse("""func @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %0 = rand {shape=[4]} : f32[4]
  %1 = fused %x {kind="pointwise"} : f32[4] {
  ^(%a: f32[4]):
    %2 = exp %a : f32[4]
    return %2
  }
  return %0, %1
}""")
    rewrite(g, table)
    assert seen == []


def test_what_a_rule_emits_is_rewritten_in_the_same_sweep():
    table = RuleTable("chain")

    @table.rule("neg")
    def neg_to_exp_of_exp(node, rw):
        """-x -> exp(exp(x))   (only to see the emitted exp rewritten at once)"""
        return rw.emit("exp", [rw.emit("exp", [node.inputs[0]])])

    @table.rule("exp")
    def exp_of_exp(node, rw):
        """exp(exp(x)) -> sin(x)   (not algebra: a probe)"""
        inner = rw.producer(node.inputs[0], "exp")
        return rw.emit("sin", [inner.inputs[0]]) if inner is not None else None

    g = parse("func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x : f32[4]\n  return %0\n}\n")
    with collect() as stats:
        out = rewrite(g, table)
    assert [n.op.name for n in out.nodes] == ["exp", "sin"]  # the outer exp became sin
    # ... in the first sweep: the second (the fixed-point check) fires nothing.
    assert stats.counts == {"exp_of_exp": 1, "neg_to_exp_of_exp": 1} and stats.sweeps == 2


def test_rules_undoing_each_other_hit_the_bound():
    table = RuleTable("flip", max_sweeps=3)

    @table.rule("exp")
    def exp_to_sin(node, rw):
        """exp -> sin   (a broken table: sin -> exp undoes it)"""
        return rw.emit("sin", list(node.inputs))

    @table.rule("sin")
    def sin_to_exp(node, rw):
        """sin -> exp"""
        return rw.emit("exp", list(node.inputs))

    g = parse("func @f(%x: f32[4]) -> f32[4] {\n  %0 = exp %x : f32[4]\n  return %0\n}\n")
    with pytest.raises(RewriteError, match="flip: rules keep rewriting what rules made"):
        rewrite(g, table)


def test_a_rule_that_changes_the_type_is_an_error():
    table = RuleTable("bad")

    @table.rule("neg")
    def to_f64(node, rw):
        """-x -> cast(x)   (wrong: another dtype)"""
        return rw.emit("cast", [node.inputs[0]], dtype="f64")

    g = parse("func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x : f32[4]\n  return %0\n}\n")
    with pytest.raises(RewriteError, match="bad rule to_f64 replaced neg"):
        rewrite(g, table)


def test_duplicate_rule_names_are_refused():
    table = _double_table()
    with pytest.raises(ValueError, match="defined twice"):
        table.rule("add", name="mul_by_two")(lambda node, rw: None)


def test_ir_opt_prints_rule_counts(tmp_path, capsys):
    from ir.opt import main

    path = tmp_path / "in.rir"
    path.write_text("""func @f(%x: f32[4]) -> f32[4] {
  %0 = full {value=1.0} : f32[]
  %1 = mul %x, %0 : f32[4]
  %2 = softmax %1 {dim=0} : f32[4]
  return %2
}
""")
    assert main(["--stats", str(path)]) == 0
    err = capsys.readouterr().err
    assert "# rewrites @f decompose: softmax x1\n" in err
    assert "# rewrites @f simplify: mul_by_one x1\n" in err
    # provenance: each firing with the line it rewrote in that pass's input
    assert "#   softmax: %2 = softmax %1 {dim=0} : f32[4]\n" in err
    assert "#   mul_by_one: %1 = mul %x, %0 : f32[4]\n" in err
