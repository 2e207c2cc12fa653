"""Builtin max/min inside compiled code are Python's, not torch.maximum (issue 32):
`key=`, the result is an operand (the same object), its dtype, NaN ordered as `>`/`<`
order it, "ambiguous" for a multi-element tensor; spec/tracer.md, "Python features"."""

import pytest
import torch

import refcomp

NAN = float("nan")
CASES = {
    "scalars": (lambda a, b: max(a, b), (torch.tensor(1.0), torch.tensor(2.0))),
    "keeps_int_dtype": (lambda a, b: max(a, b), (torch.tensor(3, dtype=torch.int32),
                                                 torch.tensor(2.5))),
    "nan_first": (lambda a, b: max(a, b), (torch.tensor(NAN), torch.tensor(1.0))),
    "nan_second": (lambda a, b: max(a, b), (torch.tensor(1.0), torch.tensor(NAN))),
    "min_then_op": (lambda a, b: min(a, b) * 2, (torch.tensor([1.0]), torch.tensor([2.0]))),
    "ambiguous": (lambda a, b: max(a, b), (torch.ones(3), torch.zeros(3))),
    "key": (lambda a, b: max(a, b, key=lambda t: t.sum()), (torch.ones(3), torch.zeros(3))),
    "with_a_number": (lambda a: max(a, 0.5), (torch.tensor(0.25),)),
    "key_on_python_values": (lambda x, words: x * len(max(words, key=len)),
                             (torch.ones(2), ["a", "bbb", "cc"])),
    "default_of_empty": (lambda x, empty: x + min(empty, default=3), (torch.ones(2), [])),
    "shape_key": (lambda a, b: max(a, b, key=lambda t: t.shape[0]) + 1,
                  (torch.ones(2), torch.ones(3))),
}


def _outcome(fn, args):
    try:
        r = fn(*args)
    except Exception as e:
        return ("raised", type(e).__name__, str(e))
    if torch.is_tensor(r):
        return ("tensor", r.dtype, r.tolist(), [i for i, a in enumerate(args) if r is a])
    return ("value", type(r), r)


@pytest.mark.parametrize("backend", ["interp", "eager", "llvm"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_builtin_min_max_are_pythons(name, backend):
    fn, args = CASES[name]
    refcomp.reset()
    assert str(_outcome(refcomp.compile(fn, backend=backend), args)) == \
        str(_outcome(fn, args))


def test_tensor_comparison_is_a_break_with_its_reason():
    report = refcomp.explain(lambda a, b: max(a, b) + 1, torch.tensor(1.0), torch.tensor(2.0))
    assert [b["id"] for b in report.break_reasons] == ["RB003"]
