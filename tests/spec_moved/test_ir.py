"""Worked examples moved out of spec/ir.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_regions():
    """spec/ir.md, "Regions"."""
    import numpy as np

    from ir import parse, run, verify

    region = """func @r(%x: f32[2]) -> f32[2] {
      %0 = fused %x : f32[2] {
      ^(%a: f32[2]):
        %1 = exp ARG : f32[2]
        return %1
      }
      return %0
    }"""
    g = parse(region.replace("ARG", "%a"))
    (out,) = run(g, [np.zeros(2, np.float32)])
    assert verify(g) == [] and out.tolist() == [1.0, 1.0]
    try:   # the body may not reach outside its region
        parse(region.replace("ARG", "%x"))
        raise AssertionError("a body must not see %x")
    except ValueError as e:
        assert "%x is used before it is defined" in str(e)
