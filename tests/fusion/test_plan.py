"""Memory plans (spec/memory.md): the checker on every plan, planted errors rejected,
in-place reuse, symbolic plans, the text form, and the arena executor."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given

from ir import GraphBuilder, ParseError, TensorType, check, parse, print_graph, run, verify
from ir.passes.fuse import fuse
from ir.passes.manager import random_inputs
from ir.passes.plan_memory import plan_memory
from ir.plan import (
    ALIGN,
    MemoryPlan,
    Slot,
    aligned,
    check_plan,
    format_size,
    provably_nonneg,
    run_with_plan,
)
from ir.types import f32, size_symbol
from tests.fusion import models
from tests.strategies import graphs

S0, S1 = size_symbol("s0"), size_symbol("s1")


def planned(g):
    p = plan_memory(fuse(g))
    assert check_plan(p) == []
    return p


def slot(p, text_name):
    """The slot of the value printed as `text_name` (e.g. '%0')."""
    from ir.printer import value_names

    names = value_names(p)
    return next(s for s in p.plan.slots if names[s.value] == text_name)


def replace_slot(p, old, **changes):
    slots = [dataclasses.replace(s, **changes) if s is old else s for s in p.plan.slots]
    out = p.with_nodes(p.nodes)
    out.plan = MemoryPlan(slots, p.plan.views)
    return out


def test_mlp_plan_reuses_the_matmul_buffer_in_place():
    g = models.mlp_graph()
    p = planned(g)
    # %0 = matmul (dies in the bias+gelu region %1, same size): %1 takes its bytes.
    first, second = slot(p, "%0"), slot(p, "%1")
    assert second.reuses is first.value and second.offset == first.offset
    assert p.plan.arena_bytes() < sum(s.size for s in p.plan.slots)
    args = random_inputs(g, np.random.default_rng(0))
    for want, got in zip(run(g, args), run_with_plan(p, args)):
        np.testing.assert_array_equal(got, want)


def test_transformer_block_arena_is_smaller_than_its_buffers():
    g = models.transformer_block()
    p = planned(g)
    total = sum(s.size for s in p.plan.slots)
    assert p.plan.arena_bytes() * 2 <= total  # liveness lets buffers share bytes
    args = random_inputs(g, np.random.default_rng(1))
    for want, got in zip(run(g, args), run_with_plan(p, args)):
        np.testing.assert_allclose(got, want, rtol=0, atol=0)


def test_a_planted_overlap_is_rejected_and_corrupts_results():
    g = models.transformer_block()
    p = planned(g)
    ln1 = slot(p, "%0")  # the ln1 output stays live across the q, k and v projections
    q_proj = slot(p, "%20")
    assert ln1.live[1] > q_proj.live[0]
    bad = replace_slot(p, q_proj, offset=ln1.offset)
    problems = check_plan(bad)
    assert any("%0 and %20 overlap while both are live" in m for m in problems), problems
    args = random_inputs(g, np.random.default_rng(2))
    (want,), (got,) = run(g, args), run_with_plan(bad, args)
    assert not np.allclose(got, want), "the arena executor must expose the overlap"


def test_planted_errors_are_each_named():
    g = models.mlp_graph()
    p = planned(g)
    first, second = slot(p, "%0"), slot(p, "%1")
    assert any("reuses %0, which is still live" in m
               for m in check_plan(replace_slot(p, second, live=(2, 3))) + check_plan(
                   replace_slot(p, first, live=(0, 2))))
    assert any("live=[0,5] but the graph says [0,1]" in m
               for m in check_plan(replace_slot(p, first, live=(0, 5))))
    assert any("is smaller than" in m for m in check_plan(replace_slot(p, first, size=64)))
    missing = p.with_nodes(p.nodes)
    missing.plan = MemoryPlan(p.plan.slots[1:], p.plan.views)
    assert any("%0 has no buffer in the plan" in m for m in check_plan(missing))
    visible = p.with_nodes(p.nodes)
    visible.plan = MemoryPlan(p.plan.slots + [Slot(g.inputs[0], 4096, 512, (0, 0))], [])
    assert any("%x is planned but is not an intermediate" in m for m in check_plan(visible))
    assert check_plan(g) == ["the graph has no memory plan"]


def test_unsafe_in_place_reuse_is_rejected():
    # The region reads %0 through a permute: writing %1 over %0 would clobber elements
    # that later iterations still read.
    text = """func @f(%x: f32[4,4]) -> f32[4,4] {
  %0 = matmul %x, %x : f32[4,4]
  %1 = fused %0 {kind="pointwise"} : f32[4,4] {
  ^(%2: f32[4,4]):
    %3 = permute %2 {perm=[1,0]} : f32[4,4]
    %4 = neg %3 : f32[4,4]
    return %4
  }
  %5 = matmul %1, %x : f32[4,4]
  return %5
}
plan {
  %0: offset=0, size=64, live=[0,1]
  %1: offset=0, size=64, live=[1,2], reuses=%0
  # arena=64 bytes, buffers=128 bytes
}
"""
    p = parse(text)
    assert print_graph(p) == text
    assert any("cannot reuse %0 in place: the body reads the operand through permute" in m
               for m in check_plan(p))
    fresh = plan_memory(p.with_nodes(p.nodes))
    assert check_plan(fresh) == [] and all(s.reuses is None for s in fresh.plan.slots)


def test_symbolic_plan_is_a_formula_checked_symbolically_and_at_call_time():
    g = models.mlp_graph(tokens=S0)
    p = planned(g)
    assert any(s.offset != 0 and not isinstance(s.offset, int) for s in p.plan.slots)
    text = print_graph(p)
    again = parse(text)
    assert print_graph(again) == text and check_plan(again) == []
    for n in (1, 3, 5):
        assert check_plan(p, sizes={S0: n}) == []
        rng = np.random.default_rng(n)
        args = [rng.standard_normal([n if d == S0 else d for d in v.type.shape]).astype(
            np.float32) for v in g.inputs]
        arena, offsets = p.plan.evaluate({S0: n})
        assert arena % ALIGN == 0 and all(o % ALIGN == 0 for o in offsets.values())
        for want, got in zip(run(g, args), run_with_plan(p, args)):
            np.testing.assert_array_equal(got, want)


def test_size_arithmetic():
    assert aligned(1) == 64 and aligned(64) == 64 and aligned(65) == 128
    assert aligned(4 * S0) == 64 * S0 and aligned(100 * S0 - 4) == 128 * S0
    assert provably_nonneg(S0 - 1) and provably_nonneg(S0 * S1 - S0)
    assert not provably_nonneg(1 - S0) and not provably_nonneg(S0 - S1)
    assert format_size(64 * S0 ** 2 + 128) == "64*s0*s0+128"
    assert format_size(S0 - 64) == "s0-64"


def test_plan_memory_leaves_its_input_alone():
    g = fuse(models.mlp_graph())
    before = print_graph(g)
    plan_memory(g)
    assert print_graph(g) == before and g.plan is None


@given(graphs(max_nodes=10))
def test_every_plan_checks_and_runs_fused_or_not(case):
    g, args = case
    want = run(g, args)
    for graph in (g, fuse(g)):  # unfused graphs have many more intermediates to place
        p = check(plan_memory(graph))
        assert check_plan(p) == []
        text = print_graph(p)
        assert print_graph(parse(text)) == text
        for expected, got in zip(want, run_with_plan(p, args)):
            np.testing.assert_array_equal(got, expected)


@given(graphs(max_nodes=10, dtypes=(f32,)))
def test_in_place_chains_on_pointwise_regions_stay_correct(case):
    # Put a matmul-free boundary (a reduction-free copy through `cat`) between random
    # regions so that region results become buffers that later regions can take over.
    g, args = case
    b = GraphBuilder("wrapped")
    xs = [b.input(v.name, v.type) for v in g.inputs]
    env = dict(zip(g.inputs, xs))
    for node in g.nodes:
        ins = [env[v] for v in node.inputs]
        out = b.insert(node.op, ins, node.attrs, [v.type for v in node.outputs])
        outs = out if isinstance(out, tuple) else (out,)
        for v, new in zip(node.outputs, outs):
            env[v] = b.cat([new], dim=0) if new.type.rank > 0 else new
    wrapped = b.build([env[v] for v in g.outputs])
    p = check(plan_memory(fuse(wrapped)))
    assert check_plan(p) == []
    for expected, got in zip(run(wrapped, args), run_with_plan(p, args)):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n", [2, 4])
def test_symbolic_plans_evaluate_consistently(n):
    b = GraphBuilder("two")
    x = b.input("x", TensorType(f32, (S0, S1)))
    y = b.cat([b.exp(x)], dim=0)
    z = b.cat([b.sum(y, dims=[1])], dim=0)
    g = b.build([b.mul(z, 2.0)])
    p = planned(g)
    assert check_plan(p, sizes={S0: n, S1: n + 1}) == []


def test_the_checker_accepts_every_plan_of_the_textual_tests():
    from pathlib import Path

    from ir import parse_module
    from ir.passes.manager import run_pipeline
    from tests.passes.test_rir import read_cases

    here = Path(__file__).resolve().parent.parent / "passes" / "plan_memory"
    checked = 0
    for path in sorted(here.glob("*.rir")):
        for passes, _, text in read_cases(path):
            for g in parse_module(text):
                p = run_pipeline(g, passes)
                assert check_plan(p) == [], (path, g.name)
                checked += 1
    assert checked >= 2


def test_the_verifier_checks_an_attached_plan_and_the_parser_names_plan_errors():
    text = print_graph(planned(models.mlp_graph()))
    bad = text.replace("%1: offset=0, size=1024, live=[1,2], reuses=%0",
                       "%1: offset=0, size=1024, live=[1,2]")
    assert bad != text
    problems = [d.message for d in verify(parse(bad))]
    assert any("%0 and %1 overlap while both are live" in m for m in problems), problems
    with pytest.raises(ParseError) as info:
        parse(text.replace(", live=[0,1]", ""))
    # The missing field is noticed at the next entry, which the error points at.
    next_entry = text.count("\n", 0, text.index("%1: offset")) + 1
    assert "expected ','" in str(info.value)
    assert (info.value.line, info.value.col) == (next_entry, 3)


def test_plan_memory_reorders_when_that_shrinks_the_arena():
    b = GraphBuilder("two_heads")
    x = b.input("x", TensorType(f32, (32, 32)))
    w1, w2 = b.input("w1", TensorType(f32, (32, 32))), b.input("w2", TensorType(f32, (32, 32)))
    first, second = b.matmul(x, w1), b.matmul(x, w2)
    g = b.build([b.sum(first, dims=[1]), b.sum(second, dims=[1])])
    f = fuse(g)
    assert [n.op.name for n in f.nodes] == ["matmul", "matmul", "fused", "fused"]
    from ir.passes.plan_memory import _planned  # the plan in the order as given

    p = planned(g)
    assert [n.op.name for n in p.nodes] == ["matmul", "fused", "matmul", "fused"]
    assert p.plan.arena_bytes() == 32 * 32 * 4 < _planned(f).plan.arena_bytes()
    args = random_inputs(g, np.random.default_rng(3))
    for want, got in zip(run(g, args), run_with_plan(p, args)):
        np.testing.assert_array_equal(got, want)


def test_reordering_keeps_random_draws_in_order():
    text = """func @f(%x: f32[64], %y: f32[32]) -> (f32[], f32[]) {
  %0 = rand {shape=[64]} : f32[64]
  %1 = randn {shape=[32]} : f32[32]
  %2 = mul %0, %x : f32[64]
  %3 = sum %2 : f32[]
  %4 = mul %1, %y : f32[32]
  %5 = sum %4 : f32[]
  return %3, %5
}"""
    g = parse(text)
    p = planned(fuse(g))
    # The first draw's consumer moves up (it frees 256 bytes); the draws keep their order.
    assert [n.op.name for n in p.nodes] == ["rand", "fused", "randn", "fused"]
    args = [np.ones(64, np.float32), np.ones(32, np.float32)]
    want = run(g, args, np.random.default_rng(9))
    got = run_with_plan(p, args, np.random.default_rng(9))
    for a, c in zip(want, got):
        np.testing.assert_array_equal(c, a)


def test_a_value_an_output_views_is_not_in_the_arena():
    # The caller sees a returned reshape's bytes, so its base is not an intermediate.
    g = parse("""func @f(%x: f32[4,8]) -> (f32[32], f32[4,8]) {
  %0 = exp %x : f32[4,8]
  %1 = reshape %0 {shape=[32]} : f32[32]
  %2 = neg %x : f32[4,8]
  %3 = permute %2 {perm=[0,1]} : f32[4,8]
  %4 = mul %3, %3 : f32[4,8]
  return %1, %4
}""")
    planned = plan_memory(fuse(g))
    assert check_plan(planned) == []
    slotted = {s.value for s in planned.plan.slots}
    base = planned.producers()[planned.outputs[0]].inputs[0]
    assert base not in slotted  # the exp region's result: viewed by output 0
    assert len(slotted) == 1  # the neg region's result: a true intermediate
