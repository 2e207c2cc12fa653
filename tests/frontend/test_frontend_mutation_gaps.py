"""refcomp/ (tracer, guards, runtime, resume): behaviours no other test pinned, found by
mutation runs (tests/MUTANTS.md).  Each test names the planted bug it kills; all cheap."""

import time

import pytest
import torch

import refcomp


@pytest.mark.parametrize("index", [
    lambda x: x[None, 1],
    lambda x: x[:, None, 2],
    lambda x: x[1, None, 1:3],
    lambda x: x[None, :, None, 0],
])
def test_none_in_an_index_moves_later_items_by_one_dim(index):
    # tensor_layout._basic_index: `None` inserts a dim, so the next item indexes the
    # dim after it (mutant: dim += 2 after None).
    x = torch.arange(24.0).reshape(4, 6)
    got = refcomp.compile(index, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(got, index(x))


def star_unpack(x):
    first, *middle, last = x.unbind(0)
    a, *rest = [first, last]
    return first * 10 + sum(middle) + last * 100 + a - rest[0] + len(middle)


def test_starred_unpacking_splits_like_python():
    # UNPACK_EX (opcodes.py): the starred target gets items[before:len - after]
    # (mutant: len + after).
    x = torch.arange(15.0).reshape(5, 3)
    cf = refcomp.compile(star_unpack, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x), star_unpack(x))


def calls_a_c_builtin(x):
    t = time.perf_counter()
    return x + (t > 0)


def test_a_c_builtin_outside_the_tables_breaks_naming_it():
    # calls.py: a C builtin (not only a torch function) is named as "not in the torch
    # table" (mutant: `or` -> `and`, which reports it as a call of its type).
    report = refcomp.explain(calls_a_c_builtin, torch.ones(2), backend="eager")
    (reason,) = [r for r in report.break_reasons if r["id"] == "RB004"]
    assert "perf_counter is not in the torch table" in reason["reason"], reason


def tuple_checks(x):
    pair, top = (x, x + 1), x.max(0)
    if isinstance(pair, tuple) and isinstance(top, tuple) and hasattr(top, "indices"):
        return pair[1] * 2 + top.values.sum()
    return x


def test_isinstance_and_hasattr_of_traced_tuples_stay_in_the_graph():
    # TupleVar.python_type() is the tuple's class (a structseq for torch.max(dim)):
    # isinstance/hasattr on it compile without a break (mutant: python_type -> None).
    x = torch.arange(6.0).reshape(2, 3)
    cf = refcomp.compile(tuple_checks, backend="eager", fullgraph=True)
    torch.testing.assert_close(cf(x), tuple_checks(x))

