"""Types: torch's promotion table, bf16/f16 rounding like torch, TensorType text.

Spec: spec/ir.md, "Types" and "Promotion".
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ir.types import (
    ALL_DTYPES,
    BY_TORCH_NAME,
    TensorType,
    bf16,
    bool_,
    dtype_from_short,
    f16,
    f32,
    f64,
    from_numpy,
    i8,
    i64,
    promote_types,
    result_type,
    round_to_dtype,
    size_symbol,
    u8,
)


def _torch(d):
    return getattr(torch, d.torch_name)


@pytest.mark.parametrize("a", ALL_DTYPES, ids=str)
def test_promote_types_equals_torch_for_every_pair(a):
    for b in ALL_DTYPES:
        expected = torch.promote_types(_torch(a), _torch(b))
        assert promote_types(a, b) is BY_TORCH_NAME[str(expected).removeprefix("torch.")], \
            f"promote_types({a}, {b})"


def test_promotion_examples_from_the_spec():
    assert promote_types(u8, i8).short == "i16"
    assert promote_types(f16, bf16) is f32
    assert promote_types(bool_, u8) is u8
    assert promote_types(i64, f16) is f16  # a float category wins regardless of width
    assert result_type(bool_, i8, f16, f32) is f32


# float32 bit patterns: every sign, exponent (incl. subnormals, inf, NaN) and mantissa.
f32_bits = hnp.arrays(np.uint32, hnp.array_shapes(max_dims=2, max_side=64),
                      elements=st.integers(0, 2**32 - 1))


@given(f32_bits)
def test_bf16_rounding_equals_torch(bits):
    values = bits.view(np.float32)
    ours = round_to_dtype(values, bf16)
    theirs = torch.from_numpy(values.copy()).to(torch.bfloat16).float().numpy()
    nan = np.isnan(theirs)
    np.testing.assert_array_equal(np.isnan(ours), nan)
    # Compare bit patterns where not NaN: rounding is exact, ties go to even.
    np.testing.assert_array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))


def test_bf16_rounding_ties_to_even_and_overflow():
    # 1 + 2**-8 lies halfway between bf16 neighbours 1 and 1 + 2**-7: it rounds to 1 (even).
    halfway = np.array([1 + 2**-8, 1 + 3 * 2**-8, np.finfo(np.float32).max], np.float32)
    assert round_to_dtype(halfway, bf16).tolist() == [1.0, 1 + 2**-6, np.inf]


@given(f32_bits)
def test_f16_rounding_equals_torch(bits):
    values = bits.view(np.float32)
    ours = round_to_dtype(values, f16)
    theirs = torch.from_numpy(values.copy()).to(torch.float16).numpy()
    np.testing.assert_array_equal(ours, theirs)  # NaN == NaN for assert_array_equal


def test_tensor_type_text():
    s0, s1 = size_symbol("s0"), size_symbol("s1")
    assert str(TensorType(f32, (4, 16))) == "f32[4,16]"
    assert str(TensorType(bool_, ())) == "bool[]"
    assert str(TensorType(bf16, (s0, 2 * s1 + 1))) == "bf16[s0,2*s1+1]"
    assert str(TensorType(f16, (3,), "cuda")) == "f16[3]@cuda"


def test_dims_simplify_to_ints():
    s0 = size_symbol("s0")
    t = TensorType(f32, (s0 - s0 + 3, sympy.Integer(2)))
    assert t.shape == (3, 2) and all(type(d) is int for d in t.shape) and t.is_static
    sym = TensorType(f64, (s0, 4))
    assert not sym.is_static and sym.numel() == 4 * s0 and sym.nbytes() == 32 * s0
    assert s0.is_positive and s0.is_integer


def test_dtype_names():
    assert dtype_from_short("bf16") is bf16
    with pytest.raises(ValueError, match="unknown dtype 'f8'; valid dtypes: bool, u8"):
        dtype_from_short("f8")
    assert from_numpy(np.dtype(np.int64)) is i64
    assert from_numpy(np.dtype(np.float32)) is f32  # f32 storage means f32, not bf16
    with pytest.raises(ValueError, match="datetime64"):
        from_numpy(np.dtype("datetime64[s]"))
    # u16/u32/u64 are extern-only (spec/ir.md, "Extern-only dtypes")
    assert from_numpy(np.dtype(np.uint16)).short == "u16" and dtype_from_short("u64").extern_only
    # complex values exist only between opaque `aten` nodes (spec/ir.md, "Types")
    assert from_numpy(np.dtype(np.complex64)).short == "c64"
    assert [d.itemsize for d in (bool_, u8, f16, bf16, f32, f64)] == [1, 1, 2, 2, 4, 8]
