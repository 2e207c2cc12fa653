"""Worked examples moved out of spec/memory.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_sizes_and_symbolic_shapes():
    """spec/memory.md, "Sizes and symbolic shapes"."""
    import dataclasses

    import numpy as np

    from ir import GraphBuilder, TensorType, run
    from ir.passes.fuse import fuse
    from ir.passes.plan_memory import plan_memory
    from ir.plan import MemoryPlan, check_plan, run_with_plan
    from ir.types import f32, size_symbol

    s0 = size_symbol("s0")
    b = GraphBuilder("mlp")
    x = b.input("x", TensorType(f32, (s0, 16)))
    w1 = b.input("w1", TensorType(f32, (16, 32)))
    w2 = b.input("w2", TensorType(f32, (32, 16)))
    g = b.build([b.add(b.matmul(b.gelu(b.matmul(x, w1)), w2), x)])
    p = plan_memory(fuse(g))
    assert check_plan(p) == [] and check_plan(p, sizes={s0: 5}) == []
    arena, offsets = p.plan.evaluate({s0: 5})
    assert arena == 192 * 5

    args = [np.ones((5, 16), np.float32), np.ones((16, 32), np.float32) / 16,
            np.ones((32, 16), np.float32) / 32]
    assert np.array_equal(run_with_plan(p, args)[0], run(g, args)[0])

    # Plant an overlap: put the second matmul's result on top of the live gelu result.
    first, gelu, second = p.plan.slots
    bad = p.with_nodes(p.nodes)
    bad.plan = MemoryPlan([first, gelu, dataclasses.replace(second, offset=0)], [])
    assert check_plan(bad) == ["%1 and %4 overlap while both are live (steps [1,2] and [2,3])"]
