"""Worked examples moved out of spec/ops.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_conventions():
    """spec/ops.md, "Conventions"."""
    import numpy as np

    from ir import GraphBuilder, TensorType, run
    from ir.types import f32, i32, i64

    # Type rules run on insert: i32 / i32 divides in floating point (the default f32).
    b = GraphBuilder()
    x = b.input("x", TensorType(i32, (3,)))
    q = b.div(x, b.input("y", TensorType(i32, (3,))))
    r = b.floor_divide(x, 2)   # the weak Python int keeps i32
    assert q.type.dtype == f32 and r.type.dtype == i32
    outs = run(b.build([q, r]), [np.array([7, -7, 1], np.int32), np.array([2, 2, 3], np.int32)])
    assert outs[0].tolist() == [3.5, -3.5, np.float32(1 / 3)]
    assert outs[1].tolist() == [3, -4, 0]

    # Reductions: dims=[] is every dim; sums of ints accumulate in i64.
    s = b.sum(x)
    assert s.type.dtype == i64 and s.type.shape == ()
