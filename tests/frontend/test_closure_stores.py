"""A store into a real closure cell -- the compiled function's own `nonlocal`, or a
variable a nested function closes over, stored in code resumed after a break -- is a
replayed side effect (`cell.cell_contents = v` after the graph), and every closure that
holds the cell reads the stored value next (one CellVar per cell, TraceContext.real_cell).
It was RB008, which split the frame (found by the torch-level soak, seed 1901: a list
comprehension over `w6` makes `w6` a cell)."""

import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]


def _resumed_cell_store(x0, x1):
    s2 = int(x1.sum())  # a break: the rest runs in a resume function
    w6 = x0.clone()
    w6[None] *= 3  # w6 is a cell (the comprehension closes over it)
    v8 = sum([w6 * k for k in range(3)])
    return v8, s2


def _make_closure_reads_the_store(breaks):
    y = 1

    def g():
        return y

    def f(x):
        nonlocal y
        s = int(x.sum()) if breaks else 0
        y = 2  # g, inlined, holds the same cell: it must read 2
        return x * g() + y + s

    return f


@pytest.mark.parametrize("backend", BACKENDS)
def test_store_into_a_cell_after_a_break_is_captured(backend):
    args = (torch.tensor([1.5, -2.0]), torch.tensor([3, 4]))
    refcomp.reset()
    explain = refcomp.explain(_resumed_cell_store, backend=backend)(*args)
    assert explain.graph_count == 2 and explain.graph_break_count == 1, explain
    compiled = refcomp.compile(_resumed_cell_store, backend=backend)
    for _ in range(2):
        torch.testing.assert_close(compiled(*args), _resumed_cell_store(*args))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("breaks", [False, True])
def test_a_closure_holding_the_cell_reads_the_stored_value(backend, breaks):
    x = torch.tensor([1.5, -2.0])
    want = _make_closure_reads_the_store(breaks)(x)
    f = _make_closure_reads_the_store(breaks)
    refcomp.reset()
    got = refcomp.compile(f, backend=backend)(x)
    torch.testing.assert_close(got, want)
    assert f.__closure__[f.__code__.co_freevars.index("y")].cell_contents == 2
    if not breaks:
        assert refcomp.stats()["counters"].get("breaks", 0) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_nonlocal_store_of_the_compiled_function_reaches_its_cell(backend):
    def make():
        scale = 1.0

        def f(x):
            nonlocal scale
            scale = 2.5
            return x * scale

        return f

    f = make()
    refcomp.reset()
    out = refcomp.compile(f, backend=backend)(torch.ones(3))
    assert f.__closure__[0].cell_contents == 2.5
    torch.testing.assert_close(out, torch.full((3,), 2.5))
    assert refcomp.stats()["counters"].get("breaks", 0) == 0
