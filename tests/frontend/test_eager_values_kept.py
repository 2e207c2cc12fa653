"""Values eager produces that refcomp used to change (issue 32): the sign of zero through
relu/clamp, `empty` under deterministic algorithms, and numpy arrays given to
torch.tensor/as_tensor (their values may change between calls; as_tensor shares memory)."""

import numpy as np
import pytest
import torch

import refcomp

BACKENDS = ["interp", "eager", "llvm"]
ZEROS = torch.tensor([-0.0, 0.0, -1.0, 1.0, float("nan")])


def _same(got, want):
    return torch.equal(torch.signbit(got), torch.signbit(want)) and \
        torch.allclose(got, want, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [
    torch.relu, lambda x: x.clamp(min=0.0), lambda x: x.clamp(max=-0.0),
    lambda x: x.clamp(-0.0, 0.0), lambda x: x.clamp(min=float("nan")),
    lambda x: torch.nn.functional.relu6(x)], ids=["relu", "min0", "max_neg0", "both",
                                                  "nan_bound", "relu6"])
def test_relu_and_clamp_keep_eagers_sign_of_zero(fn, backend):
    refcomp.reset()
    assert _same(refcomp.compile(fn, backend=backend)(ZEROS), fn(ZEROS))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_under_deterministic_algorithms_is_filled_as_eager(backend):
    def f(x):
        return torch.empty(3) + x, torch.empty_like(x, dtype=torch.int32)

    refcomp.reset()
    compiled = refcomp.compile(f, backend=backend)
    torch.use_deterministic_algorithms(True)
    try:
        got, want = compiled(torch.ones(3)), f(torch.ones(3))
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.isnan(got[0]).all() and torch.isnan(want[0]).all()
    assert torch.equal(got[1], want[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_as_tensor_of_an_array_writes_the_callers_array(backend):
    def f(arr):
        t = torch.as_tensor(arr)
        t.mul_(2)
        return t + 1

    mine, theirs = np.ones(3, dtype=np.float32), np.ones(3, dtype=np.float32)
    refcomp.reset()
    torch.testing.assert_close(refcomp.compile(f, backend=backend)(mine), f(theirs))
    assert np.array_equal(mine, theirs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_of_an_array_reads_its_values_at_each_call(backend):
    def f(x, arr):
        return x + torch.tensor(arr)

    arr = np.ones(2, dtype=np.float32)
    refcomp.reset()
    compiled = refcomp.compile(f, backend=backend)
    compiled(torch.zeros(2), arr)
    arr[0] = 5.0  # no guard reads an array's values: the call must read them
    torch.testing.assert_close(compiled(torch.zeros(2), arr), f(torch.zeros(2), arr))


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_of_a_0d_tensor_is_captured(backend):
    """softmax/log_softmax over dim -1 of a 0-d tensor were internal errors (RB018: the
    decomposition indexed a dim a 0-d tensor does not have); 3 of 400 fuzzer programs."""
    def f(x):
        return torch.softmax(x * 2, -1), torch.log_softmax(x, 0)

    for value in (3.0, float("inf"), float("nan")):
        x = torch.tensor(value)
        refcomp.reset()
        report = refcomp.explain(f, x, backend=backend)
        assert report.break_reasons == []
        for got, want in zip(refcomp.compile(f, backend=backend)(x), f(x)):
            torch.testing.assert_close(got, want, equal_nan=True)
