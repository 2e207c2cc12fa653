"""Element types, torch's type promotion, and tensor types with symbolic-ready shapes.

Owns: `DType` (the closed set of element types), `promote_types`, `TensorType`.
Must not know: graphs, ops, bytecode, backends.  Spec: spec/ir.md, "Types".

A dimension is an `int` or a sympy expression over size symbols (`s0`, `s1`, ...),
so dynamic shapes need no redesign.  numpy has no bfloat16: the reference
semantics store bf16 values in float32 arrays, rounded to bf16 after every op
(see `round_to_dtype`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np
import sympy

Dim = Union[int, sympy.Expr]


@dataclass(frozen=True)
class DType:
    """One element type.  `short` is the name used in textual IR (`f32`)."""

    short: str
    torch_name: str
    kind: str  # "bool" | "int" | "uint" | "float" | "complex"
    bits: int
    np_name: str  # numpy storage dtype (bf16 is stored as float32)

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.np_name)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_complex(self) -> bool:
        """c64, c128: complex values the IR computes on (not the extern-only c32)."""
        return self.kind == "complex" and not self.extern_only

    @property
    def is_inexact(self) -> bool:
        """Floating or complex: the dtypes gradients flow through."""
        return self.kind in ("float", "complex")

    @property
    def extern_only(self) -> bool:
        """u16, u32, u64, c32: held only by the operands and results of opaque `aten`
        nodes."""
        return self.kind == "uint" and self.bits > 8 or self.kind == "complex" and self.bits < 64

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __repr__(self) -> str:
        return self.short


bool_ = DType("bool", "bool", "bool", 8, "bool")
u8 = DType("u8", "uint8", "uint", 8, "uint8")
i8 = DType("i8", "int8", "int", 8, "int8")
i16 = DType("i16", "int16", "int", 16, "int16")
i32 = DType("i32", "int32", "int", 32, "int32")
i64 = DType("i64", "int64", "int", 64, "int64")
f16 = DType("f16", "float16", "float", 16, "float16")
bf16 = DType("bf16", "bfloat16", "float", 16, "float32")
f32 = DType("f32", "float32", "float", 32, "float32")
f64 = DType("f64", "float64", "float", 64, "float64")

# Complex values: only ops with the `complex` fact take or make them (spec/ir.md, "Complex
# values"); kernel backends first rewrite them into float pairs (ir/passes/complex_lowering.py).
c64 = DType("c64", "complex64", "complex", 64, "complex64")
c128 = DType("c128", "complex128", "complex", 128, "complex128")

# Unsigned integers wider than 8 bits (torch's "limited support" dtypes: `hash_tensor`'s
# uint64 result): only `aten` nodes take or make them (spec/ir.md, "Extern-only dtypes").
u16 = DType("u16", "uint16", "uint", 16, "uint16")
u32 = DType("u32", "uint32", "uint", 32, "uint32")
u64 = DType("u64", "uint64", "uint", 64, "uint64")
# torch's complex32 (`chalf`), stored as complex64 arrays (as bf16 is as float32): every
# complex32 value is a complex64 value.
c32 = DType("c32", "complex32", "complex", 32, "complex64")

ALL_DTYPES = (bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64)  # the real dtypes
FLOAT_DTYPES = (f16, bf16, f32, f64)
INT_DTYPES = (u8, i8, i16, i32, i64)
COMPLEX_DTYPES = (c64, c128)
EXTERN_DTYPES = (u16, u32, u64, c32)
BY_SHORT = {d.short: d for d in ALL_DTYPES + COMPLEX_DTYPES + EXTERN_DTYPES}
BY_TORCH_NAME = {d.torch_name: d for d in ALL_DTYPES + COMPLEX_DTYPES + EXTERN_DTYPES}
DEFAULT_FLOAT = f32


def dtype_from_short(name: str) -> DType:
    try:
        return BY_SHORT[name]
    except KeyError:
        valid = ", ".join(BY_SHORT)
        raise ValueError(f"unknown dtype {name!r}; valid dtypes: {valid}") from None


def from_numpy(dt: np.dtype) -> DType:
    for d in ALL_DTYPES + COMPLEX_DTYPES + EXTERN_DTYPES:
        if d not in (bf16, c32) and d.np == np.dtype(dt):
            return d
    raise ValueError(f"numpy dtype {dt} has no refcomp dtype")


_CATEGORY = {"bool": 0, "uint": 1, "int": 1, "float": 2, "complex": 3}


def promote_types(a: DType, b: DType) -> DType:
    """torch.promote_types: the smallest type both convert to without losing category.

    Categories rank bool < integer < floating < complex.  Within integers, u8 with a signed
    type needs a wider signed type (u8 + i8 -> i16).  f16 with bf16 gives f32.  Complex
    with floating keeps the wider parts (c64 + f64 -> c128, as torch).
    """
    if a == b:
        return a
    if a.is_complex or b.is_complex:
        parts = promote_types(real_dtype(a), real_dtype(b))
        return complex_dtype(parts) if parts.is_float else (a if a.is_complex else b)
    ca, cb = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if ca != cb:
        return a if ca > cb else b
    if a.is_float:
        if {a, b} == {f16, bf16}:
            return f32
        return a if a.bits > b.bits else b
    # Both integral.
    if a.kind == "uint" or b.kind == "uint":
        other = b if a.kind == "uint" else a
        return other if other.bits > 8 else i16
    return a if a.bits > b.bits else b


def real_dtype(dtype: DType) -> DType:
    """The dtype of a complex dtype's parts (c64 -> f32, c128 -> f64); others unchanged."""
    return {c64: f32, c128: f64}.get(dtype, dtype)


def complex_dtype(dtype: DType) -> DType:
    """The complex dtype with parts of `dtype` (f64 -> c128; f32, f16, bf16 -> c64: the IR
    has no complex32) -- torch's promotion of a float with a complex."""
    if dtype.is_complex:
        return dtype
    return c128 if dtype == f64 else c64


def result_type(*dtypes: DType) -> DType:
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote_types(out, d)
    return out


def round_to_dtype(array: np.ndarray, dtype: DType) -> np.ndarray:
    """Return `array` stored as `dtype` (numpy storage), rounding to bf16 when needed."""
    if dtype is bf16:
        bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
        # Round to nearest even on the top 16 bits; NaN stays NaN.
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        out = rounded.view(np.float32).reshape(np.shape(array))
        return np.where(np.isnan(array), np.float32(np.nan), out)
    return np.asarray(array).astype(dtype.np, copy=False)


def is_symbolic(dim: Dim) -> bool:
    return not isinstance(dim, (int, np.integer))


def simplify_dim(dim: Dim) -> Dim:
    """Canonical form: a plain int when the expression is a number."""
    if isinstance(dim, (int, np.integer)):
        return int(dim)
    dim = sympy.sympify(dim)
    if dim.is_Integer:
        return int(dim)
    return dim


def dim_str(dim: Dim) -> str:
    return str(dim).replace(" ", "")


@dataclass(frozen=True)
class TensorType:
    """dtype, shape (ints or sympy expressions) and device of a tensor value."""

    dtype: DType
    shape: tuple[Dim, ...]
    device: str = "cpu"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(simplify_dim(d) for d in self.shape))
        # Types key the verifier's memo and many dicts: hashed once (immutable).
        object.__setattr__(self, "_hash", hash((self.dtype.short, self.shape, self.device)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return not any(is_symbolic(d) for d in self.shape)

    def numel(self) -> Dim:
        n: Dim = 1
        for d in self.shape:
            n = n * d
        return simplify_dim(n)

    def nbytes(self) -> Dim:
        return simplify_dim(self.numel() * self.dtype.itemsize)

    def with_shape(self, shape) -> TensorType:
        return TensorType(self.dtype, tuple(shape), self.device)

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(dtype, self.shape, self.device)

    def __str__(self) -> str:
        dims = ",".join(dim_str(d) for d in self.shape)
        text = f"{self.dtype.short}[{dims}]"
        return text if self.device == "cpu" else f"{text}@{self.device}"

    __repr__ = __str__


def size_symbol(name: str) -> sympy.Symbol:
    """A size symbol: a positive integer (sizes 0 and 1 are specialized, as in torch)."""
    return sympy.Symbol(name, integer=True, positive=True)
