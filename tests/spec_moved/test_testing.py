"""Worked examples moved out of spec/testing.md (issue 37): each checks the section it cites.

The spec keeps at most one short example per rule and points here for the rest.
"""

from spec_moved import as_module


@as_module
def test_python_level_programs_the_world_after_each_call():
    """spec/testing.md, "Python-level programs: the world after each call"."""
    import torch

    from tests.fuzz.pyworld import PyProgram, _prelude, _world_outcome, outcome, snapshot

    program = PyProgram(
        _prelude(["property", "globals"]) + "\n\ndef f(x0):\n"
        "    global COUNT, SCALE\n"
        "    COUNT += 1\n"
        "    return x0 * holder.w + SCALE,\n",
        [[((2, 4), "float32", "contiguous", 0)], [((3, 4), "float32", "contiguous", 1)]],
        ["SCALE = 3.0\nholder._w = -1.0"])          # run in the module before the 2nd call
    assert outcome(program, "interp").kind == "ok"
    ns = program.module()
    ns["f"](torch.ones(2, 4))
    after = snapshot(ns)
    assert after["COUNT"] == 1 and after["LOG"] == ("list", ["Holder.w"])
    ns["f"](torch.ones(2, 4))                     # the property ran once more: a difference
    assert _world_outcome(snapshot(ns), after, (0, 0)).kind == "side-effect"
