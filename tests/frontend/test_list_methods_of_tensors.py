"""Regression (e6a8160): every method of a list or tuple read its items as Python
constants, so `out.append(t)` on a list that held a tensor was an internal error (RB018)
and the frame broke; only `index` and `count` compare the items."""

import torch

import refcomp


def test_append_to_a_list_of_tensors_is_traced():
    def f(x):
        out = []
        out.append(x + 1)
        out.append(x * 2)
        out.extend([x - 1])
        out.insert(0, x)
        return out, [1, 2, 2].count(2)

    x = torch.randn(3)
    report = refcomp.explain(f, x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    got, want = refcomp.compile(f)(x), f(x)
    assert got[1] == want[1]
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b)
