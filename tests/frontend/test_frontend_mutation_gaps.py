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



@pytest.mark.parametrize("backend", ["eager", "llvm"])
def test_pad_keeps_a_non_zero_fill_value(backend):
    # torch_ops._pad: the fill value reaches the IR (mutant: the `value is None` arms
    # swapped, so a given value became 0.0 and None crashed).
    import torch.nn.functional as F

    def f(x):
        return F.pad(x, (1, 2), value=3.5), F.pad(x, (2, 0))

    x = torch.randn(3, 4)
    for got, want in zip(refcomp.compile(f, backend=backend)(x), f(x)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_index_after_a_slice_reads_the_next_dim(dynamic):
    # tensor_layout._basic_index: after a slice the next item indexes the following dim
    # (mutants: dim += 1 -> -= 1 or += 2, in the static and the bounded-slice branches);
    # 3-d so that dim -1 is not dim 1.
    def f(x):
        return x[1:3, 2], x[1:3, :, 1], x[:2, 1:3, 0], x[1:, 2], x[:, 1:, 3]

    x = torch.arange(120.0).reshape(4, 5, 6)
    cf = refcomp.compile(f, backend="eager", fullgraph=True, dynamic=dynamic)
    for got, want in zip(cf(x), f(x)):
        torch.testing.assert_close(got, want)
    # Symbolic slices must not be retried with static sizes (a failed symbolic trace is,
    # which would hide a wrong dim in the symbolic branches).
    want_type = "f32[s0,s1,s2]" if dynamic else "f32[4,5,6]"
    assert str(cf.last_entry.graph.inputs[0].type) == want_type


def test_the_recompile_limit_suggests_a_tensor_only_for_numbers():
    # cache._suggestion: "pass it as a tensor" is for a changing int/float, not a str or
    # a bool (mutant: `and not isinstance(bool)` -> `or`).
    import warnings

    def by_mode(x, mode):
        return x * 2 if mode == "a" else x - 1

    def by_scale(x, k):
        return x * k

    cases = [(by_mode, [f"m{i}" for i in range(10)], False),
             (by_scale, [float(i) + 0.5 for i in range(10)], True)]
    for fn, values, tensor_hint in cases:
        cf = refcomp.compile(fn, backend="eager")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for v in values:
                cf(torch.ones(2), v)
        (limit,) = [str(w.message) for w in seen if "cache_size_limit" in str(w.message)]
        assert ("pass it as a tensor" in limit) is tensor_hint, limit
