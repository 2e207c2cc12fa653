"""The `fused` op: a kernel region whose nested body graph is run as one unit.

A fused node's operands bind to its body's inputs in order; its results are the
body's outputs.  Its type rule is therefore the body's signature (the verifier
checks it), not a function of operand types alone.  Spec: spec/ir.md, "Regions".
"""

from __future__ import annotations

from ir.ops.registry import FUSED, defop


def _no_standalone_rule(types, **attrs):
    raise TypeError("a fused node's result types come from its body")


def _no_standalone_ref(*arrays, **attrs):
    raise TypeError("a fused node is run by interpreting its body")


FUSED_OP = defop(
    "fused", FUSED, operands=("xs",), variadic=True, attrs={"kind": ("str", "")},
    infer=_no_standalone_rule, ref=_no_standalone_ref,
    doc="a kernel region: operands bind to the body's inputs, results are its outputs",
)
