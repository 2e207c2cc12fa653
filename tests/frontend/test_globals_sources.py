"""The globals of another module are a source of their own name (`M['torch']`), never the
compiled frame's global of the same name (`G['torch']`, the module object): guards load
each source once by name, so a frame that read its global `torch` and inlined a function
of torch/__init__.py (F.pad's non-constant modes call
torch.are_deterministic_algorithms_enabled, which reads torch's `_C`) subscripted the
module object, every check raised, and the frame "failed its guards right after tracing"
and ran eagerly (found with tests/frontend/test_channels_last_3d_pad.py, Nov 27; issue 11).
"""

import warnings

import pytest
import torch
import torch.nn.functional as F

import refcomp


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_frame_global_and_module_globals_of_one_name(backend):
    def f(x):
        return F.pad(x, (1, 1), mode="replicate") + torch.ones(1)

    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    x = torch.randn(2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "guards fail right after tracing" is a warning
        got = cf(x)
        assert torch.equal(cf(x), got)  # the second call hits the entry
    assert torch.equal(got, f(x))
    assert len(cf.cache.entries) == 1
    names = {g.name for g in cf.cache.entries[0].guards.guards}
    assert "G['torch']" in names and "M['torch']['_C']" in names, sorted(names)
