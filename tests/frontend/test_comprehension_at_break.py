"""A comprehension's function on the stack at a break (its iterable breaks:
`{k: v for k, v in zip(keys, y.tolist())}`) reaches the resumed code as an argument.
CPython 3.11 makes that function anew at every call, so guarding it by identity
recompiled the resumed code at every call (transformers' backbone wrapper, Segformer's
steady state); it is guarded by its code (refcomp/tracer/context.py, COMPREHENSIONS)."""

import pytest
import torch

import refcomp


def _f(x, keys):
    y = x * 2
    out = {k: v for k, v in zip(keys, y.tolist())}  # tolist breaks (RB002)
    return y * out["a"]


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
def test_resumed_comprehension_is_not_recompiled_per_call(backend):
    refcomp.reset()
    compiled = refcomp.compile(_f, backend=backend)
    x = torch.full((2,), 1.5)
    for _ in range(4):
        torch.testing.assert_close(compiled(x, ["a", "b"]), _f(x, ["a", "b"]))
    counters = refcomp.stats()["counters"]
    assert counters["breaks"] == 1 and counters.get("recompiles", 0) == 0, counters
