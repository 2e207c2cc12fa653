"""Every pointwise op's scalar form equals its reference; the vocabulary is closed.

The scalar form is what the LLVM and Triton backends lower, through the methods
named in `ir.scalar.SCALAR_VOCABULARY`.  Here it runs on `NumpyScalarOps`, with its
operands cast by `compute_dtypes` as a backend would, and must give the value of
the op's one-node graph on the interpreter (the `ref`).  Inputs come from the torch
comparison cases in tests/ir/test_ops.py.  Spec: spec/ir.md, "Scalar forms".
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from ir import GraphBuilder, TensorType, run
from ir.ops.registry import POINTWISE, all_ops, lookup
from ir.scalar import SCALAR_VOCABULARY, NumpyScalarOps, compute_dtypes, compute_result_dtype
from ir.types import bf16, bool_, f16, f32, i64, round_to_dtype
from tests.ir.test_ops import CASES, TOLERANCE

# Ops of complex values only have no scalar form: lower_complex rewrites them into float
# ops before any kernel (tests/ir/test_complex_values.py).
COMPLEX_ONLY = {"complex", "conj", "angle"}
POINTWISE_OPS = sorted(op.name for op in all_ops() if op.category == POINTWISE and
                       op.name not in COMPLEX_ONLY)

# Attribute values that steer a scalar form down each of its branches.
ATTR_VARIANTS = {
    "gelu": [{"approximate": "none"}, {"approximate": "tanh"}],
    "clamp": [{"min": 0.0}, {"max": 1}, {"min": -1, "max": 1.5}],
    "cast": [{"dtype": f32}, {"dtype": i64}],
}


class CheckedOps:
    """NumpyScalarOps that refuses (and records) any method outside the vocabulary."""

    def __init__(self):
        self.inner, self.used = NumpyScalarOps(), set()

    def __getattr__(self, name):
        if name not in SCALAR_VOCABULARY:
            raise AssertionError(f"scalar form calls {name!r}, which is not in SCALAR_VOCABULARY")
        self.used.add(name)
        return getattr(self.inner, name)


def _scalar_result(name, inputs, attrs):
    op = lookup(name)
    attrs = op.normalize_attrs(attrs)
    types = [TensorType(dt, a.shape) for a, dt in inputs]
    result = op.infer(types, **attrs)
    s = CheckedOps()
    dtypes = compute_dtypes(name, [dt for _, dt in inputs], result.dtype)
    operands = [s.cast(a, dt) if dt != src else a for (a, src), dt in zip(inputs, dtypes)]
    with np.errstate(all="ignore"):
        value = np.asarray(op.scalar(s, *operands, **attrs))
    value_dtype = compute_result_dtype(name, result.dtype)
    assert value.dtype == value_dtype.np, \
        f"{name}: scalar form gives {value.dtype}, expected {value_dtype}"
    return result.dtype, round_to_dtype(value, result.dtype)


def _ref_result(name, inputs, attrs):
    b = GraphBuilder()
    values = [b.input(f"x{i}", TensorType(dt, a.shape)) for i, (a, dt) in enumerate(inputs)]
    (out,) = run(b.build([b.op(name, *values, **attrs)]), [a for a, _ in inputs])
    return out


@pytest.mark.parametrize("name", POINTWISE_OPS)
def test_scalar_form_equals_ref(name):
    _, strategy = CASES[name]

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(strategy)
    def check(case):
        inputs, attrs = case
        try:
            expected = _ref_result(name, inputs, attrs)
        except (TypeError, ValueError):
            return  # an ill-typed case (torch rejects it too): no scalar form to check
        dtype, actual = _scalar_result(name, inputs, attrs)
        assert actual.shape == expected.shape
        if dtype.is_float:
            # The scalar form and the ref may round intermediate steps differently.
            rtol, atol = TOLERANCE[dtype]
            if dtype in (f16, bf16):
                rtol, atol = 2 * rtol, 2 * atol
            np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=name)

    check()


class Recorder:
    """Symbolic ScalarOps: records the vocabulary a scalar form uses, for any data."""

    def __init__(self):
        self.used = set()

    def __getattr__(self, name):
        self.used.add(name)
        return lambda *args, **kwargs: "value"


def test_scalar_forms_use_exactly_the_vocabulary():
    used = set()
    for op in all_ops():
        if op.category != POINTWISE or op.name in COMPLEX_ONLY:
            continue
        assert op.scalar is not None, f"pointwise op {op.name} has no scalar form"
        for attrs in ATTR_VARIANTS.get(op.name, [{}]):
            s = Recorder()
            op.scalar(s, *["value"] * len(op.operands), **op.normalize_attrs(attrs))
            outside = s.used - set(SCALAR_VOCABULARY)
            assert not outside, f"{op.name}'s scalar form calls {outside}, not in the vocabulary"
            used |= s.used
    # Backends implement every word; a word no op uses is dead weight for them.
    assert set(SCALAR_VOCABULARY) - used == set()


def test_numpy_scalar_ops_implement_the_vocabulary():
    s = NumpyScalarOps()
    missing = [name for name in SCALAR_VOCABULARY if not callable(getattr(s, name, None))]
    assert missing == []


def test_non_pointwise_ops_have_no_scalar_form():
    extra = [op.name for op in all_ops() if op.category != POINTWISE and op.scalar is not None]
    assert extra == []


def test_compute_dtypes_rules():
    # Ints feeding a float op compute in the result dtype; halves compute in f32.
    assert compute_dtypes("exp", [i64], f32) == [f32]
    assert compute_dtypes("add", [f16, f16], f16) == [f32, f32]
    assert compute_dtypes("add", [i64, bf16], bf16) == [f32, f32]
    assert compute_dtypes("where", [bool_, f16, i64], f16) == [bool_, f32, f32]
    assert compute_dtypes("cast", [f16], i64) == [f16]


def test_numpy_scalar_pow_of_an_integer_to_a_negative_power_is_torchs():
    # Regression (tests/codegen/test_kernel.py's random graphs: pow of an i64 -1 by itself
    # raised "Integers to negative integer powers are not allowed" in the numpy kernel
    # runner, whose pow was np.power; the IR reference already follows torch).
    s = NumpyScalarOps()
    a = np.array([-1, 1, 2, -1, 3], dtype=np.int64)
    b = np.array([-1, -3, -1, -2, 2], dtype=np.int64)
    np.testing.assert_array_equal(s.pow(a, b), [-1, 1, 0, 1, 9])
    np.testing.assert_array_equal(s.pow(a, b), run_pow_reference(a, b))


def run_pow_reference(a, b):
    import torch

    return torch.pow(torch.from_numpy(a), torch.from_numpy(b)).numpy()
