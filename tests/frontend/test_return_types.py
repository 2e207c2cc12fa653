"""Multi-output ops return what torch returns: `torch.return_types.*` (fields and
unpacking), or a plain tuple where torch gives one (var_mean/std_mean); inside the
trace and to the caller, on every backend (spec/correctness.md, "Return types")."""

import pytest
import torch

from tests.frontend.eager_diff import assert_like_eager

BACKENDS = ["interp", "eager", "llvm"]


def max_fields(x):
    r = x.max(1)
    return r.values * 2, r.indices, r


def min_unpack(x):
    v, i = torch.min(x, dim=0, keepdim=True)
    return v + 1, i


def max_1d(x):
    return x[0].max(0), x[0].min(-1).values


def returned_struct(x):
    return torch.max(x, 1)


def struct_across_break(x):
    r = x.max(1)
    print("break")
    return r.values + 1, r


def sort_topk(x):
    s = torch.sort(x, 1, descending=True)
    t = x.topk(2)
    return s.values, s.indices, t.values + 1, t


def scans_and_stats(x):
    return (torch.cummax(x, 0).values, x.cummin(1), x.median(1).values, x.mode(1),
            torch.aminmax(x).min, x.aminmax(dim=1), torch.var_mean(x, 1),
            torch.std_mean(x, dim=0))


def aminmax_fields(x):
    mn, mx = torch.aminmax(x, dim=0)
    r = torch.aminmax(x)
    return mn * mx, r.max - r.min, r


CASES = [max_fields, min_unpack, max_1d, returned_struct, struct_across_break, sort_topk,
         scans_and_stats, aminmax_fields]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_return_types_like_eager(f, backend):
    assert_like_eager(f, lambda: (torch.randn(4, 5),), backend)
