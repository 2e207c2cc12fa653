"""ir/: behaviours no other test pinned, found by mutation runs (tests/MUTANTS.md).

Each test names the planted bug it kills; all are cheap (no compilation).
"""

import re

import numpy as np
import pytest

import codegen.opaque  # noqa: F401  (registers the `aten` executor: fold could run it)
from ir import parse, print_graph, run, verify, viz
from ir.interpreter import InterpreterError
from ir.passes.fold import fold
from ir.passes.manager import run_pipeline
from ir.passes.registry import get_pass, register_pass
from ir.plan import run_with_plan
from ir.rewrite import MAX_DEPTH, RewriteError, RuleTable, rewrite

TWO_INPUTS = """
func @{name}(%x: f32[4], %y: f32[4]) -> f32[4] {{
  %0 = mul %x, %y : f32[4]
  %1 = add %0, %y : f32[4]
  return %1
}}
"""


def test_a_graph_break_is_joined_by_one_dashed_edge_each_way():
    # viz.graphs_to_dot: one edge from the previous graph's first output to the break
    # and one from the break to the next graph's first input (mutant: inputs[:2]).
    a, b = parse(TWO_INPUTS.format(name="a")), parse(TWO_INPUTS.format(name="b"))
    dot = viz.graphs_to_dot([a, b], ["[RB008] print() at f.py:3"])
    assert len(re.findall(r"\[style=dashed\]", dot)) == 2, dot


def test_command_line_no_plan_leaves_the_plan_out(tmp_path):
    # mutant: show_plan=args.no_plan
    src = tmp_path / "in.rir"
    src.write_text(TWO_INPUTS.format(name="f"))
    out = tmp_path / "out.dot"
    assert viz.main([str(src), "-o", str(out), "--passes=plan_memory"]) == 0
    assert "<table" in out.read_text()
    assert viz.main([str(src), "-o", str(out), "--passes=plan_memory", "--no-plan"]) == 0
    assert "<table" not in out.read_text()


def test_fold_never_evaluates_an_effectful_node():
    # An `aten` call has effects (it must run as eager, raising where eager raises), so
    # fold leaves it even when its operands are constants (mutant: `and` -> `or` in
    # _foldable, which would evaluate it once at compile time).
    g = parse("""func @f() -> f32[3] {
  %0 = full {value=2.0, shape=[3], dtype=f32} : f32[3]
  %1 = aten %0 {fn="torch.Tensor.clamp_min", args="T[0], 0.5", results="f32[3]"} : f32[3]
  return %1
}
""")
    assert fold(g).op_counts().get("aten") == 1


@pytest.mark.parametrize("dim", ["s0+2", "2*s0-1", "s0+s1+1"])
def test_size_expressions_parse_to_their_value(dim):
    # mutant: `value + term` -> `value - term` in the parser's dim grammar
    text = f"func @f(%x: f32[{dim}]) -> f32[{dim}] {{\n  return %x\n}}\n"
    g = parse(text)
    (got,) = g.inputs[0].type.shape
    assert str(got).replace(" ", "") == dim
    assert print_graph(g) == text


def test_arena_executor_keeps_bf16_values():
    # ir.plan.run_with_plan stores bf16 as its upper 16 bits (mutant: `>> 15`).
    g = run_pipeline(parse("""func @f(%x: bf16[8]) -> bf16[8] {
  %0 = exp %x : bf16[8]
  %1 = neg %0 : bf16[8]
  %2 = mul %1, %x : bf16[8]
  return %2
}
"""), ["plan_memory"])
    assert g.plan is not None and g.plan.slots
    x = np.linspace(-2, 2, 8).astype(np.float32)
    x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)  # exactly representable
    np.testing.assert_array_equal(run_with_plan(g, [x])[0], run(g, [x])[0])


def test_registering_another_pass_under_a_taken_name_is_refused():
    # mutant: the `raise` removed from register_pass
    taken = get_pass("dce")
    with pytest.raises(ValueError, match="registered twice"):
        register_pass("dce")(lambda g: g)
    assert get_pass("dce") is taken
    assert register_pass("dce")(taken) is taken  # the same function again is fine


def test_interpreter_refuses_an_input_of_another_static_size():
    # mutant: `not is_symbolic(dim)` -> `is_symbolic(dim)` in _bind_shape
    g = parse(TWO_INPUTS.format(name="f"))
    with pytest.raises(InterpreterError, match="expects f32\\[4\\]"):
        run(g, [np.ones(5, np.float32), np.ones(5, np.float32)])
    # ... and one of another rank (mutant: that raise removed)
    with pytest.raises(InterpreterError, match="got shape \\(4, 1\\)"):
        run(g, [np.ones((4, 1), np.float32), np.ones(4, np.float32)])


# --- the rewrite engine (ir/rewrite.py): what a rule emits is swept before the sweep goes on
def _emit_then_use_table():
    table = RuleTable("emit_then_use")

    @table.rule("exp")
    def exp_to_neg_of_scaled(node, rw):
        """exp(x) -> neg(x * 1)   (a test table: not the algebra of exp)"""
        (x,) = node.inputs
        one = rw.emit("full", [], value=1.0, shape=(), dtype=x.type.dtype)
        return rw.emit("neg", [rw.emit("mul", [x, one])])

    @table.rule("mul")
    def times_one(node, rw):
        """x * 1 -> x"""
        x, k = node.inputs
        return x if rw.splat(k) == 1 and x.type == node.output.type else None
    return table


def test_a_node_emitted_after_a_rewritten_one_reads_its_replacement():
    # The emitted `mul` is rewritten to x at once; the emitted `neg` (an op no rule
    # matches) must then read x, not the dropped mul (mutant: `len(replace) == mark`).
    g = rewrite(parse("func @f(%x: f32[4]) -> f32[4] {\n  %0 = exp %x : f32[4]\n"
                      "  return %0\n}\n"), _emit_then_use_table())
    assert verify(g) == []
    assert [n.op.name for n in g.nodes if n.op.name != "full"] == ["neg"]
    x = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    np.testing.assert_array_equal(run(g, [x])[0], -x)


def _countdown_table():
    table = RuleTable("countdown")

    @table.rule("clamp")
    def count_down(node, rw):
        """clamp(x, min=m) -> clamp(x, min=m-1) while m > 0   (nests one level per step)"""
        if node.attrs["min"] <= 0:
            return None
        return rw.emit("clamp", list(node.inputs), min=node.attrs["min"] - 1,
                       max=node.attrs["max"])
    return table


@pytest.mark.parametrize("steps, ok", [(MAX_DEPTH, True), (MAX_DEPTH + 2, False)])
def test_rules_may_nest_up_to_max_depth(steps, ok):
    # Note [The engine]: a node's rewrites may nest MAX_DEPTH levels deep, no fewer
    # (mutant: depth + 2 per level) and no more.
    g = parse(f"func @f(%x: f32[3]) -> f32[3] {{\n  %0 = clamp %x {{min={float(steps)},"
              f" max=100.0}} : f32[3]\n  return %0\n}}\n")
    if ok:
        out = rewrite(g, _countdown_table())
        assert [n.attrs["min"] for n in out.nodes] == [0.0]
    else:
        with pytest.raises(RewriteError, match="levels deep"):
            rewrite(g, _countdown_table())


def test_a_fused_node_without_its_body_is_refused_clearly():
    # The standalone type rule and ref of `fused` refuse (mutants: their raise removed,
    # which builds a node with no result type, or runs it as None).
    from ir import GraphBuilder, TensorType
    from ir.graph import Graph, Node, Value
    from ir.ops.registry import lookup
    from ir.types import f32

    b = GraphBuilder("f")
    x = b.input("x", TensorType(f32, (3,)))
    with pytest.raises(TypeError, match="come from its body"):
        b.op("fused", x)
    out = Value(TensorType(f32, (3,)))
    g = Graph("f", [x], [Node(lookup("fused"), [x], {}, [out])], [out])
    with pytest.raises(InterpreterError, match="interpreting its body"):
        run(g, [np.ones(3, np.float32)])


# --- ae9bd43 seed-19 survivors left open by the first session (tests/MUTANTS.md) ----------

def test_a_random_draw_the_backward_reads_is_saved_not_redrawn():
    # autodiff.recomputable: effectful nodes (random draws) are never recomputed (mutant:
    # their `return False` -> True let the backward draw a new dropout mask).
    from ir import GraphBuilder, TensorType
    from ir.autodiff import joint
    from ir.types import f64
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (8,)))
    mask = b.dropout_mask(shape=[8], p=0.5, dtype="f64")
    graph = b.build([b.sum(b.mul(b.exp(x), mask))])
    j = joint(graph, wants_grad=[True], grad_outputs=[0])
    assert "dropout_mask" not in {n.op.name for n in j.backward.nodes}
    producer = j.forward.producers()
    saved_ops = [producer[v].op.name for v in j.forward.outputs[j.n_outputs:]]
    assert "dropout_mask" in saved_ops, saved_ops


def test_saved_bytes_counts_every_saved_intermediate():
    # Joint.saved_bytes sums forward.outputs[n_outputs:] (mutant: from n_outputs + 1,
    # dropping the first saved value); refcomp reports it per training graph.
    from ir import GraphBuilder, TensorType
    from ir.autodiff import joint
    from ir.types import f64
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f64, (4, 3)))
    w = b.input("w", TensorType(f64, (3, 3)))
    graph = b.build([b.sum(b.matmul(b.tanh(b.matmul(x, w)), w))])
    j = joint(graph, wants_grad=[True, True], grad_outputs=[0])
    assert j.n_saved == 1 and j.saved_bytes() == 4 * 3 * 8  # tanh(x @ w), f64[4,3]


def test_pipeline_stats_add_up_the_sweeps_of_each_run():
    # manager._merge: a pass run twice reports the sum of both runs' sweeps (mutant: -=).
    from ir.rewrite import collect
    g = parse("func @f(%x: f32[4]) -> f32[4] {\n  %0 = neg %x : f32[4]\n"
              "  %1 = neg %0 : f32[4]\n  %2 = add %1, %x : f32[4]\n  return %2\n}\n")
    with collect() as first:
        once = get_pass("simplify")(g)
    with collect() as second:
        get_pass("simplify")(once)
    assert first.sweeps > 0 and second.sweeps > 0
    stats = {}
    run_pipeline(g, ["simplify", "simplify"], stats=stats)
    assert stats["simplify"].sweeps == first.sweeps + second.sweeps


def test_a_taken_name_hint_prints_as_a_numbered_variant_of_itself():
    # printer.Namer: a hint already used becomes `x_1`, not a bare number (mutant: the
    # `not` of `not name.isdigit()` removed, so only digit hints were kept as bases).
    from ir import GraphBuilder, TensorType
    from ir.types import f32
    b = GraphBuilder("f")
    x = b.input("x", TensorType(f32, (3,)))
    y = b.exp(x)
    y.name = "x"
    text = print_graph(b.build([y]))
    assert "%x_1 = exp %x" in text, text


def test_fusion_report_evaluates_symbolic_byte_counts_at_the_given_sizes():
    # fusion_report.report(graph, sizes): symbolic counts become ints at `sizes`
    # (mutant: `sizes is not None` -> `is None` left them symbolic).
    from ir.fusion_report import report
    text = ("func @f(%x: f32[{n},8]) -> f32[{n}] {{\n  %0 = exp %x : f32[{n},8]\n"
            "  %1 = neg %0 : f32[{n},8]\n  %2 = sum %1 {{dims=[1]}} : f32[{n}]\n"
            "  %3 = mul %2, %2 : f32[{n}]\n  return %3\n}}\n")
    _, static = report(parse(text.format(n=5)))
    g = parse(text.format(n="s0"))
    _, symbolic = report(g, sizes={g.inputs[0].type.shape[0]: 5})
    counts = [(r.bytes_before, r.bytes_after, r.arena_bytes) for r in (static, symbolic)]
    assert counts[0] == counts[1] and all(type(c) is int for c in counts[1]), counts
