"""Graph inputs written in place (spec/memory.md, "Graph inputs written in place"): the
plan's `into` rule and its reasons, the checker, the text form, and the llvm backend's
option `writes_back` storing a mutated input's new value into the input's bytes."""

import dataclasses

import torch

import ir
from codegen.backends import get_backend
from codegen.runtime import prepare
from ir.plan import Into, check_plan, plan_input_writes

# %1: the new value of %a (a * 2 + b); %2: read from it.
STEP = """func @f(%a: f32[64,32], %b: f32[64,32]) -> (f32[64,32], f32[64,32]) {
  %k1 = full {value=2.0} : f32[]
  %0 = mul %a, %k1 : f32[64,32]
  %1 = add %0, %b : f32[64,32]
  %2 = mul %1, %b : f32[64,32]
  return %1, %2
}"""


def planned(text, pairs):
    return plan_input_writes(prepare(ir.parse(text), {}), pairs)


def reasons(graph) -> list:
    return [item.why for item in graph.plan.into]


def compile_llvm(graph, **options):
    return get_backend("llvm").compile_graph(graph, options)


def test_the_new_value_is_stored_into_the_input_and_returned_as_it():
    graph = ir.parse(STEP)
    fn = compile_llvm(graph, writes_back=((0, 0),))
    assert "into %a" in ir.print_graph(fn.compiled.graph)
    a, b = torch.randn(64, 32), torch.randn(64, 32)
    want_a = a * 2 + b
    new, other = fn(a, b)
    assert new is a  # the caller sees its own tensor: no copy to make
    torch.testing.assert_close(a, want_a)
    torch.testing.assert_close(other, want_a * b)
    # without the option, a fresh output as before
    a2 = torch.randn(64, 32)
    assert compile_llvm(graph)(a2, b)[0] is not a2


def test_a_later_reader_of_the_old_value_keeps_the_copy():
    # the matmul reads a's new value and its old one, so it runs after the new value
    text = """func @f(%a: f32[8,8]) -> (f32[8,8], f32[8,8]) {
  %k = full {value=1.0} : f32[]
  %0 = add %a, %k : f32[8,8]
  %1 = matmul %0, %a : f32[8,8]
  return %0, %1
}"""
    g = planned(text, [(0, 0)])
    assert reasons(g) == ["matmul, a later step, reads the input's old value"]
    assert check_plan(g) == []
    a = torch.randn(8, 8)
    want = ((a + 1), (a + 1) @ a)
    got = compile_llvm(ir.parse(text), writes_back=((0, 0),))(a)
    assert got[0] is not a
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)


def test_an_output_that_is_the_old_value_keeps_the_copy():
    text = """func @f(%a: f32[64]) -> (f32[64], f32[64]) {
  %k3 = full {value=1.0} : f32[]
  %0 = add %a, %k3 : f32[64]
  return %0, %a
}"""
    assert reasons(planned(text, [(0, 0)])) == [
        "an output is the input's old value or a view of it"]
    a = torch.randn(64)
    old = a.clone()
    new, same = compile_llvm(ir.parse(text), writes_back=((0, 0),))(a, )
    assert new is not a
    torch.testing.assert_close(same, old)


def test_a_value_written_into_two_inputs_or_of_another_shape_keeps_the_copy():
    text = """func @f(%a: f32[64], %b: f32[64], %c: f32[]) -> (f32[64], f32[64], f32[]) {
  %0 = add %a, %b : f32[64]
  %k4 = full {value=1.0} : f32[]
  %1 = add %c, %k4 : f32[]
  return %0, %0, %1
}"""
    assert reasons(planned(text, [(0, 0), (1, 1)])) == [
        "the new value is also another output"] * 2
    assert reasons(planned(text, [(2, 2), (2, 0)])) == ["the input is written back twice"] * 2


def test_a_result_reading_the_input_in_another_loop_keeps_the_copy():
    # An optimizer's `step`: step + 1 is stored in a scalar stage, and the update of
    # another shape reads step in its own loop (maybe split across threads).
    text = """func @f(%s: f32[], %p: f32[64]) -> (f32[], f32[64]) {
  %k5 = full {value=1.0} : f32[]
  %0 = add %s, %k5 : f32[]
  %1 = mul %p, %0 : f32[64]
  return %0, %1
}"""
    g = planned(text, [(0, 0), (1, 1)])
    assert reasons(g) == ["another result of the node, of another shape, reads the operand",
                          ""]
    s, p = torch.tensor(3.0), torch.randn(64)
    want = p * 4
    got_s, got_p = compile_llvm(ir.parse(text), writes_back=((0, 0), (1, 1)))(s, p)
    assert got_p is p and got_s is not s
    torch.testing.assert_close(p, want)
    torch.testing.assert_close(got_s, torch.tensor(4.0))


def test_results_of_one_loop_read_the_old_elements():
    # exp_avg and the parameter of an Adam step: the parameter's update reads exp_avg's
    # new value and old one, each written in place: stores come after the loop's loads.
    text = """func @f(%m: f32[4096], %p: f32[4096], %g: f32[4096]) -> (f32[4096], f32[4096]) {
  %k6 = full {value=0.9} : f32[]
  %0 = mul %m, %k6 : f32[4096]
  %1 = add %0, %g : f32[4096]
  %2 = sub %1, %m : f32[4096]
  %3 = add %p, %2 : f32[4096]
  return %1, %3
}"""
    g = planned(text, [(0, 0), (1, 1)])
    assert reasons(g) == ["", ""] and check_plan(g) == []
    m, p, grad = torch.randn(4096), torch.randn(4096), torch.randn(4096)
    new_m = m * 0.9 + grad
    want_p = p + (new_m - m)
    got = compile_llvm(ir.parse(text), writes_back=((0, 0), (1, 1)))(m, p, grad)
    assert got[0] is m and got[1] is p
    torch.testing.assert_close(m, new_m)
    torch.testing.assert_close(p, want_p)


def test_a_non_contiguous_input_gets_the_write_in_its_copy():
    fn = compile_llvm(ir.parse(STEP), writes_back=((0, 0),))
    a, b = torch.randn(32, 64).t(), torch.randn(64, 32)
    want = a * 2 + b
    new, _ = fn(a, b)
    assert new is not a  # the kernel wrote into the contiguous copy the call made
    torch.testing.assert_close(new, want)


def test_the_text_form_and_the_checker():
    g = planned(STEP, [(0, 0)])
    text = ir.print_graph(g)
    assert "%0: into %a\n" in text
    again = ir.parse(text)
    assert ir.print_graph(again) == text and check_plan(again) == []
    refused = planned("""func @f(%a: f32[64]) -> (f32[64], f32[64]) {
  %k7 = full {value=1.0} : f32[]
  %0 = add %a, %k7 : f32[64]
  return %0, %a
}""", [(0, 0)])
    text = ir.print_graph(refused)
    assert '%0: into %a, copied="an output is the input\'s old value or a view of it"' in text
    assert ir.print_graph(ir.parse(text)) == text
    # a planted unsafe `into` is reported
    item = refused.plan.into[0]
    refused.plan = dataclasses.replace(refused.plan, into=[Into(item.value, item.input)])
    assert check_plan(refused) == ["%0 cannot be written into %a in place: an output is the"
                                   " input's old value or a view of it"]
