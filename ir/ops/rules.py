"""Shape and dtype rules shared by op definitions.  Spec: spec/ir.md, "Types".

Each rule takes the operand types (and attributes) and returns the result type,
raising `TypeError` with a message that names the op's problem.  The verifier
turns those errors into diagnostics that quote the offending IR line.
"""

from __future__ import annotations

from ir.types import (
    DEFAULT_FLOAT,
    Dim,
    TensorType,
    bool_,
    i32,
    i64,
    real_dtype,
    result_type,
    simplify_dim,
)


def same_device(types) -> str:
    devices = {t.device for t in types}
    if len(devices) > 1:
        raise TypeError(f"operands are on different devices: {sorted(devices)}")
    return types[0].device


def pointwise_shape(types) -> tuple[Dim, ...]:
    """Operands share one shape; a rank-0 operand stands for a scalar and broadcasts."""
    shapes = {t.shape for t in types if t.rank > 0}
    if len(shapes) > 1:
        listed = ", ".join(str(t) for t in types)
        raise TypeError(f"pointwise operands must have equal shapes (or be rank 0): {listed};"
                        " broadcast explicitly with expand")
    return shapes.pop() if shapes else ()


def promoted(types, **_attrs) -> TensorType:
    """Result dtype by torch promotion, shape of the operands."""
    return TensorType(result_type(*(t.dtype for t in types)), pointwise_shape(types),
                      same_device(types))


def float_promoted(types, **_attrs) -> TensorType:
    """Like `promoted`, but integral and bool results become the default float (torch.exp)."""
    out = promoted(types)
    return out if out.dtype.is_inexact else out.with_dtype(DEFAULT_FLOAT)


def abs_type(types, **_attrs) -> TensorType:
    """x's type (not bool); a complex x gives its parts' dtype (|z| is real)."""
    out = non_bool(types)
    return out.with_dtype(real_dtype(out.dtype))


def to_bool(types, **_attrs) -> TensorType:
    """bool; the operands' shape (operands of any dtype)."""
    return promoted(types).with_dtype(bool_)


def integral_only(types, **_attrs) -> TensorType:
    """promote(operands), which must be an integer or bool; the operands' shape."""
    out = promoted(types)
    if out.dtype.is_float:
        raise TypeError(f"bitwise ops need integer or bool operands, got {out.dtype}")
    return out


def non_bool(types, **_attrs) -> TensorType:
    """promote(operands), which must not be bool; the operands' shape."""
    out = promoted(types)
    if out.dtype == bool_:
        raise TypeError("this op is not defined for bool tensors")
    return out


def normalize_dim(dim: int, rank: int) -> int:
    """Python-style negative dims; rank 0 accepts dim 0 and -1 like torch."""
    size = max(rank, 1)
    if not -size <= dim < size:
        raise TypeError(f"dim {dim} is out of range for rank {rank}")
    return dim % size


def normalize_dims(dims, rank: int) -> tuple[int, ...]:
    """Reduction dims; an empty list means all dims (torch's `dim=None`).  A 0-d tensor
    has none: torch accepts dim 0 or -1 there and reduces the one element, so its dims
    normalize to () (a kernel then indexes no dim of the empty shape)."""
    if dims is None or len(dims) == 0:
        return tuple(range(rank))
    out = tuple(sorted({normalize_dim(d, rank) for d in dims}))
    if len(out) != len(dims):
        raise TypeError(f"dims {list(dims)} repeat a dimension")
    return () if rank == 0 else out


def reduced_shape(shape, dims, keepdim: bool) -> tuple[Dim, ...]:
    dims = normalize_dims(dims, len(shape))
    out = []
    for i, size in enumerate(shape):
        if i in dims:
            if keepdim:
                out.append(1)
        else:
            out.append(size)
    return tuple(out)


def broadcast_shapes(*shapes) -> tuple[Dim, ...]:
    """numpy/torch broadcasting of shapes (used by the builder, not by op rules)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        size: Dim = 1
        for shape in shapes:
            j = i - (rank - len(shape))
            if j < 0:
                continue
            d = shape[j]
            if d == 1:
                continue
            if size == 1:
                size = d
            elif simplify_dim(size - d) != 0:
                raise TypeError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(size)
    return tuple(out)


def index_dtype_check(t: TensorType, what: str) -> None:
    # torch's index ops take int64 or int32 indices only.
    if t.dtype not in (i64, i32):
        raise TypeError(f"{what} must be an i64 or i32 tensor, got {t.dtype}")
