"""Every composite op has a decomposition, and each rule's docstring is its math."""

from __future__ import annotations

import re

from ir.ops.registry import COMPOSITE, all_ops
from ir.passes.decompose import DECOMPOSITIONS


def test_every_composite_op_has_a_decomposition():
    composite = {op.name for op in all_ops() if op.category == COMPOSITE}
    missing = composite - set(DECOMPOSITIONS)
    assert not missing, f"composite ops without a rule in ir/passes/decompose.py: {missing}"


def test_each_decomposition_states_its_math():
    for name, rule in DECOMPOSITIONS.items():
        first = (rule.__doc__ or "").strip().splitlines()[0]
        assert re.match(rf"{name}\([\w, ]+\) = ", first), \
            f"{name}: docstring should read as the math"
