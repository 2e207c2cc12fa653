"""The pass manager: verification after each pass, naming the culprit, timing, printing."""

from __future__ import annotations

import io

import numpy as np
import pytest

from ir import parse
from ir.graph import Graph, Node
from ir.passes.manager import (
    DEFAULT_PIPELINE,
    PassError,
    check_same_results,
    random_inputs,
    run_pipeline,
)
from ir.verify import VerificationError

SOURCE = """func @f(%x: f32[4]) -> f32[4] {
  %0 = add %x, %x : f32[4]
  %1 = neg %x : f32[4]
  return %1
}
"""


def test_default_pipeline_names():
    assert DEFAULT_PIPELINE == ("decompose", "fold", "simplify", "scatters", "cse", "dce")


def test_runs_named_passes_and_times_them():
    timings = {}
    g = run_pipeline(parse(SOURCE), ["dce"], timings=timings)
    assert [n.op.name for n in g.nodes] == ["neg"]
    assert set(timings) == {"dce"} and timings["dce"] >= 0.0


def test_print_after_stamps_the_pass():
    out = io.StringIO()
    run_pipeline(parse(SOURCE), ["dce"], print_after="all", stream=out)
    text = out.getvalue()
    assert text.startswith("# after dce (") and " ms)\nfunc @f" in text
    assert "add" not in text
    quiet = io.StringIO()
    run_pipeline(parse(SOURCE), ["dce"], print_after=["fold"], stream=quiet)
    assert quiet.getvalue() == ""


def test_a_pass_that_breaks_the_ir_is_named():
    def breaker(g):
        first, second = g.nodes
        # The add now reads the neg's result before the neg defines it.
        return g.with_nodes([Node(first.op, [second.output, second.output], first.attrs,
                                  first.outputs), second])
    with pytest.raises(PassError, match="pass 'breaker' broke the IR") as info:
        run_pipeline(parse(SOURCE), [breaker])
    assert "not defined before use" in str(info.value)


def test_a_pass_that_raises_is_named():
    def crash(g):
        raise KeyError("boom")
    with pytest.raises(PassError, match="pass 'crash' failed: KeyError"):
        run_pipeline(parse(SOURCE), [crash])


def test_invalid_input_is_not_blamed_on_a_pass():
    g = parse(SOURCE)
    bad = Graph("f", g.inputs, g.nodes[1:], [g.nodes[0].outputs[0]])  # returns a dropped value
    with pytest.raises(VerificationError, match="input IR"):
        run_pipeline(bad, ["dce"])


def test_check_semantics_names_a_pass_that_changes_results():
    from ir.ops.registry import lookup

    def wrong(g):
        node = g.nodes[1]  # neg -> abs: same types, different values
        return g.with_nodes([g.nodes[0], Node(lookup("abs"), node.inputs, {}, node.outputs)])
    run_pipeline(parse(SOURCE), [wrong])  # without the check, nothing notices
    with pytest.raises(PassError, match="pass 'wrong' changed the program's results"):
        run_pipeline(parse(SOURCE), [wrong], check_semantics=True)


def test_check_semantics_catches_mutation_of_the_input():
    def mutate(g):
        g.nodes.pop(0)
        return g
    with pytest.raises(PassError, match="mutated its input"):
        run_pipeline(parse(SOURCE), [mutate], check_semantics=True)


def test_random_inputs_bind_symbols_consistently():
    g = parse("func @f(%x: f32[s0,3], %y: i64[s0]) -> f32[s0,3] {\n  return %x\n}\n")
    x, y = random_inputs(g, np.random.default_rng(1))
    assert x.shape[0] == y.shape[0] and x.shape[1] == 3
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert check_same_results(g, g, [x, y]) == ""


def test_unknown_pass_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown pass 'nope'; valid passes: .*dce"):
        run_pipeline(parse(SOURCE), ["nope"])


def test_a_comma_separated_string_names_the_passes():
    timings = {}
    run_pipeline(parse(SOURCE), "cse, dce", timings=timings)
    assert list(timings) == ["cse", "dce"]


def test_the_decorator_is_the_only_registration():
    """Every `@register_pass` in ir/passes/ is found without a list of modules."""
    import re

    from ir.passes.registry import all_passes
    from tests.conftest import ROOT

    declared = set()
    for path in (ROOT / "ir" / "passes").glob("*.py"):
        declared.update(re.findall(r'^@register_pass\("(\w+)"\)', path.read_text(), re.M))
    assert declared and declared <= set(all_passes())
