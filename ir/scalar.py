"""The scalar vocabulary pointwise ops are written in, and its numpy implementation.

Owns: `SCALAR_VOCABULARY` (the method names every backend's ScalarOps implements),
`NumpyScalarOps` (the vocabulary on numpy arrays, used to test each op's scalar
form against its `ref`), and `compute_dtypes` (which dtype each operand is cast to
before an op's scalar form sees it).  Spec: spec/ir.md, "Scalar forms".

Note [Scalar operand casts]: the lowering casts every operand to the promoted dtype
of all operands; if the op's result is floating and that promoted dtype is not, it
casts to the result dtype instead (torch.exp on ints computes in the default float).
f16 and bf16 then compute in f32 (torch's "opmath", see Note [Reference precision]
in ir/ops/pointwise.py): the store rounds to the result dtype once.  Exempt:
`where`'s condition stays bool, and `cast`'s operand is passed as is.
`compute_result_dtype` is the dtype the scalar form's value has before that store.

Semantics of the vocabulary, beyond the numpy function of the same name: `floor`,
`ceil`, `round` (half to even), `trunc` leave integers unchanged; `sign(NaN)` is 0;
`cast` float -> int truncates toward zero; the shifts give 0 (left) or the sign fill
(right) for a shift amount outside [0, bits); `const(value, like)` is `value` in
`like`'s dtype; `compare(name, a, b)` with name in eq ne lt le gt ge.
"""

from __future__ import annotations

import numpy as np

from ir.ops.pointwise import erf_ref, pow_ref
from ir.types import DType, bf16, f16, f32, result_type, round_to_dtype

SCALAR_VOCABULARY = (
    "const", "cast", "to_bool",
    "add", "sub", "mul", "truediv", "floordiv", "remainder", "fmod", "pow",
    "neg", "abs", "sign", "floor", "ceil", "round", "trunc",
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf",
    "atan2", "maximum", "minimum", "compare", "where", "isnan",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "bitwise_left_shift", "bitwise_right_shift",
)

# The dtype f16 and bf16 compute in (see Note [Scalar operand casts]).
_OPMATH = {f16: f32, bf16: f32}


def compute_result_dtype(op_name: str, result: DType) -> DType:
    """The dtype of a scalar form's value for op `op_name` with result dtype `result`.

    A `cast` yields its target dtype (a cast to f16 must round); every other op yields
    the result dtype, with f16/bf16 lifted to f32 until the store."""
    if op_name == "cast":
        return result
    return _OPMATH.get(result, result)


def compute_dtypes(op_name: str, operand_dtypes: list[DType], result: DType) -> list[DType]:
    """The dtype each operand is cast to before the op's scalar form runs."""
    if op_name == "cast":
        return list(operand_dtypes)
    if op_name == "where":
        value = result_type(*operand_dtypes[1:])
        value = _OPMATH.get(value, value)
        return [operand_dtypes[0], value, value]
    common = result_type(*operand_dtypes)
    if result.is_float and not common.is_float:
        common = result
    common = _OPMATH.get(common, common)
    return [common] * len(operand_dtypes)


class NumpyScalarOps:
    """The vocabulary on numpy arrays (elementwise), mirroring what backends emit."""

    def const(self, value, like):
        return np.asarray(value).astype(np.asarray(like).dtype)

    def cast(self, x, dtype):
        x = np.asarray(x)
        if dtype is bf16:
            return round_to_dtype(x.astype(np.float32), bf16)
        if x.dtype.kind == "f" and dtype.is_int:
            return np.trunc(x).astype(dtype.np)
        return x.astype(dtype.np)

    def to_bool(self, x):
        return np.asarray(x).astype(bool)

    add, sub, mul = staticmethod(np.add), staticmethod(np.subtract), staticmethod(np.multiply)
    truediv, floordiv = staticmethod(np.true_divide), staticmethod(np.floor_divide)
    remainder, fmod = staticmethod(np.remainder), staticmethod(np.fmod)
    pow = staticmethod(pow_ref)  # torch semantics for an integer to a negative power
    neg, abs = staticmethod(np.negative), staticmethod(np.abs)
    exp, log = staticmethod(np.exp), staticmethod(np.log)
    log1p, expm1, sqrt = staticmethod(np.log1p), staticmethod(np.expm1), staticmethod(np.sqrt)
    sin, cos, tanh = staticmethod(np.sin), staticmethod(np.cos), staticmethod(np.tanh)
    atan2 = staticmethod(np.arctan2)
    maximum, minimum = staticmethod(np.maximum), staticmethod(np.minimum)
    isnan, logical_not = staticmethod(np.isnan), staticmethod(np.logical_not)
    logical_and, logical_or = staticmethod(np.logical_and), staticmethod(np.logical_or)
    logical_xor = staticmethod(np.logical_xor)
    bitwise_and, bitwise_or = staticmethod(np.bitwise_and), staticmethod(np.bitwise_or)
    bitwise_xor, bitwise_not = staticmethod(np.bitwise_xor), staticmethod(np.invert)

    def sign(self, x):
        x = np.asarray(x)
        if x.dtype == np.bool_:
            return x
        out = np.sign(x)
        return np.where(np.isnan(x), np.zeros((), x.dtype), out) if x.dtype.kind == "f" else out

    def _rounding(fn):
        def op(self, x):
            x = np.asarray(x)
            return x if x.dtype.kind in "biu" else fn(x)
        return op

    floor, ceil = _rounding(np.floor), _rounding(np.ceil)
    round, trunc = _rounding(np.round), _rounding(np.trunc)
    del _rounding

    def bitwise_left_shift(self, a, s):
        bits = np.asarray(a).dtype.itemsize * 8
        inside = (s >= 0) & (s < bits)
        return np.where(inside, np.left_shift(a, np.where(inside, s, 0)), 0).astype(a.dtype)

    def bitwise_right_shift(self, a, s):
        bits = np.asarray(a).dtype.itemsize * 8
        inside = (s >= 0) & (s < bits)
        fill = np.where(a < 0, -1, 0)
        return np.where(inside, np.right_shift(a, np.where(inside, s, 0)), fill).astype(a.dtype)

    def rsqrt(self, x):
        return (1.0 / np.sqrt(x)).astype(np.asarray(x).dtype)

    def sigmoid(self, x):
        return (1.0 / (1.0 + np.exp(-x))).astype(np.asarray(x).dtype)

    def erf(self, x):
        return erf_ref(x).astype(np.asarray(x).dtype)

    def compare(self, name, a, b):
        return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                "gt": np.greater, "ge": np.greater_equal}[name](a, b)

    def where(self, c, a, b):
        return np.where(c, a, b)
