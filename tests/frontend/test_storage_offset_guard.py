"""A graph input's storage offset (Note [Input storage offsets], refcomp/tracer/opaque.py).

`torch.as_strided(x, size, stride, 0)` (and `as_strided_copy`, `as_strided_scatter`)
counts an explicit storage offset from the start of x's storage, so its value depends on
where x starts in its storage, which TENSOR_MATCH does not check.  Such a call into a
graph input's storage guards that input's storage offset (`L['x'].storage_offset() ==
0`) and runs at a break where it is not 0 (`interp` hands ATen a fresh copy: corpus
as_strided_offset_of_offset_input_interp).  spec/guards.md, "Which fact yields which
guard" (issue 11)."""

import warnings

import pytest
import torch

import refcomp


def _at_offset(offset):
    """A (3, 3) tensor of the same values at storage offset `offset` of its buffer."""
    base = torch.arange(100.0, 100.0 + 9 + offset)
    base[offset:] = torch.arange(9.0)
    return base[offset:].view(3, 3)


FORMS = {
    "as_strided_copy": lambda x: torch.as_strided_copy(x, (2, 2), (1, 2), 0),
    "as_strided": lambda x: torch.as_strided(x, (2, 2), (1, 2), 0) * 2,
    "as_strided_scatter": lambda x: torch.as_strided_scatter(
        x, torch.zeros(2, 2), (2, 2), (1, 2), 0),
    "of_a_view": lambda x: torch.as_strided_copy(x.view(-1), (2, 2), (1, 2), 0) + 1,
    "keyword": lambda x: torch.as_strided_copy(x, (2, 2), (1, 2), storage_offset=0),
}


@pytest.mark.parametrize("backend", ["interp", "llvm", "eager"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_explicit_offset_follows_the_inputs_storage_offset(form, backend):
    f = FORMS[form]
    refcomp.reset()
    cf = refcomp.compile(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for offset in (0, 3, 0, 1):  # offset 0 traces in one graph; 3 and 1 must not reuse it
            x = _at_offset(offset)
            torch.testing.assert_close(cf(x), f(_at_offset(offset)), rtol=0, atol=0)
    assert len(cf.cache.entries) == 2  # offset 0 in the graph; offset 3 (and 1) at a break


def test_guard_is_listed_and_explained():
    f = FORMS["as_strided_copy"]
    refcomp.reset()
    ex = refcomp.explain(f, _at_offset(0))
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert "L['x'].storage_offset() == 0" in str(ex)
    cf = refcomp.compile(f, backend="interp")
    cf(_at_offset(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf(_at_offset(3))
    assert "L['x'].storage_offset() == 0 (actual: 3)" in str(cf.cache.history[-1])


def test_nonzero_offset_breaks_with_a_reason():
    refcomp.reset()
    ex = refcomp.explain(FORMS["as_strided_copy"], _at_offset(3))
    reasons = " ".join(r["reason"] for r in ex.break_reasons)
    assert "starts at offset 3" in reasons, reasons


def test_no_guard_without_an_explicit_offset():
    def f(x):
        return torch.as_strided_copy(x, (2, 2), (1, 2))  # x's own offset: any is fine

    refcomp.reset()
    cf = refcomp.compile(f, backend="interp")
    for offset in (0, 3):
        torch.testing.assert_close(cf(_at_offset(offset)), f(_at_offset(offset)))
    assert len(cf.cache.entries) == 1
    assert "storage_offset" not in str(refcomp.explain(f, _at_offset(3)))
