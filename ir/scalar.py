"""The scalar vocabulary pointwise ops are written in, and its numpy implementation.

Owns: `SCALAR_VOCABULARY` (the method names every backend's ScalarOps implements),
`NumpyScalarOps` (the vocabulary on numpy arrays, used to test each op's scalar
form against its `ref`), and `compute_dtypes` (which dtype each operand is cast to
before an op's scalar form sees it).  Spec: spec/ir.md, "Scalar forms".

Rule for operand dtypes (Note [Scalar operand casts]): the lowering casts every
operand to the promoted dtype of all operands; if the op's result is floating and
that promoted dtype is not, it casts to the result dtype instead (torch.exp on
ints computes in the default float).  Exempt: `where`'s condition stays bool, and
`cast`'s operand is passed as is.
"""

from __future__ import annotations

import numpy as np

from ir.ops.pointwise import erf_ref
from ir.types import DType, result_type

SCALAR_VOCABULARY = (
    "const", "cast", "to_bool",
    "add", "sub", "mul", "truediv", "floordiv", "remainder", "fmod", "pow",
    "neg", "abs", "sign", "floor", "ceil", "round", "trunc",
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf",
    "atan2", "maximum", "minimum", "compare", "where", "isnan",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
)


def compute_dtypes(op_name: str, operand_dtypes: list[DType], result: DType) -> list[DType]:
    """The dtype each operand is cast to before the op's scalar form runs."""
    if op_name == "cast":
        return list(operand_dtypes)
    if op_name == "where":
        value = result_type(*operand_dtypes[1:])
        return [operand_dtypes[0], value, value]
    common = result_type(*operand_dtypes)
    if result.is_float and not common.is_float:
        common = result
    return [common] * len(operand_dtypes)


class NumpyScalarOps:
    """The vocabulary on numpy arrays (elementwise), mirroring what backends emit."""

    def const(self, value, like):
        return np.asarray(value).astype(np.asarray(like).dtype)

    def cast(self, x, dtype):
        x = np.asarray(x)
        if x.dtype.kind == "f" and dtype.is_int:
            return np.trunc(x).astype(dtype.np)
        return x.astype(dtype.np)

    def to_bool(self, x):
        return np.asarray(x).astype(bool)

    add, sub, mul = staticmethod(np.add), staticmethod(np.subtract), staticmethod(np.multiply)
    truediv, floordiv = staticmethod(np.true_divide), staticmethod(np.floor_divide)
    remainder, fmod, pow = staticmethod(np.remainder), staticmethod(np.fmod), staticmethod(np.power)
    neg, abs, sign = staticmethod(np.negative), staticmethod(np.abs), staticmethod(np.sign)
    floor, ceil, round = staticmethod(np.floor), staticmethod(np.ceil), staticmethod(np.round)
    trunc, exp, log = staticmethod(np.trunc), staticmethod(np.exp), staticmethod(np.log)
    log1p, expm1, sqrt = staticmethod(np.log1p), staticmethod(np.expm1), staticmethod(np.sqrt)
    sin, cos, tanh = staticmethod(np.sin), staticmethod(np.cos), staticmethod(np.tanh)
    atan2 = staticmethod(np.arctan2)
    maximum, minimum = staticmethod(np.maximum), staticmethod(np.minimum)
    isnan, logical_not = staticmethod(np.isnan), staticmethod(np.logical_not)
    logical_and, logical_or = staticmethod(np.logical_and), staticmethod(np.logical_or)
    logical_xor = staticmethod(np.logical_xor)
    bitwise_and, bitwise_or = staticmethod(np.bitwise_and), staticmethod(np.bitwise_or)
    bitwise_xor, bitwise_not = staticmethod(np.bitwise_xor), staticmethod(np.invert)

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
