"""The ScalarOps protocol every backend implements, and the dtype rules kernels need.

Owns: the re-export of the scalar vocabulary (`SCALAR_VOCABULARY`, defined once in
ir/scalar.py next to the op registry that uses it), `result_dtype` (the dtype a
vocabulary call produces, so a Kernel can type its temporaries) and `compute_dtype`
(the dtype a kernel computes a storage dtype in).  Must not know: any backend.
Spec: spec/codegen.md, "Kernel model" and "Numerics".

A backend's ScalarOps is any object with one method per vocabulary name; the
lowering calls an op's `scalar` form with such an object.  The methods and their
argument conventions are those of `ir.scalar.NumpyScalarOps`:

    const(value, like)  cast(x, dtype)  to_bool(x)  compare(name, a, b)  where(c, a, b)
    and every other name: f(*operands) with operands of one dtype.
"""

from __future__ import annotations

from ir.scalar import SCALAR_VOCABULARY, NumpyScalarOps, compute_dtypes
from ir.types import DType, bf16, bool_, f16, f32

__all__ = ["SCALAR_VOCABULARY", "NumpyScalarOps", "compute_dtypes", "compute_dtype",
           "result_dtype", "BOOL_RESULT"]

# Vocabulary names whose result is bool whatever their operands are.
BOOL_RESULT = frozenset({"to_bool", "compare", "isnan", "logical_and", "logical_or",
                         "logical_xor", "logical_not"})


def compute_dtype(dtype: DType) -> DType:
    """The dtype a kernel computes values of storage dtype `dtype` in.

    f16 and bf16 are loaded into f32 and computed in f32, each op's result rounded to
    its half type (Note [Half casts] in codegen/lower.py); every other dtype computes in
    itself.
    """
    return f32 if dtype in (f16, bf16) else dtype


def result_dtype(method: str, arg_dtypes: list[DType], attrs: dict) -> DType:
    """The dtype of `method(*args, **attrs)` in the vocabulary."""
    if method in BOOL_RESULT:
        return bool_
    if method == "cast":
        return compute_dtype(attrs["dtype"])
    if method == "const":
        return attrs["dtype"]
    if method == "where":
        return arg_dtypes[1]
    return arg_dtypes[0]
