"""GraphBuilder: build graphs op by op, with types inferred on insert.

Owns: inserting nodes, Python scalars as rank-0 `full` constants (torch's "weak"
scalar promotion), and numpy-style broadcasting made explicit with
`reshape`/`expand` so that every pointwise node sees equal shapes.  Spec:
spec/ir.md, "Graphs and the builder".

    b = GraphBuilder("forward")
    x = b.input("x", TensorType(f32, (4, 16)))
    y = b.relu(b.add(x, 1.0))
    g = b.build([y])
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ir.graph import Graph, Node, Value
from ir.ops.registry import POINTWISE, OpDef, has_op, lookup
from ir.ops.rules import broadcast_shapes
from ir.types import (
    DEFAULT_FLOAT,
    TensorType,
    bool_,
    c64,
    complex_dtype,
    dtype_from_short,
    i64,
    real_dtype,
    simplify_dim,
)


class OpDTypeError(TypeError):
    """A node would take or make a value of a dtype its op does not compute."""


class ComplexDTypeError(OpDTypeError):
    """A node of an op without the `complex` fact would take or make a complex value."""


class ExternDTypeError(OpDTypeError):
    """A node of an op other than `aten` would take or make a u16/u32/u64 value."""


class GraphBuilder:
    def __init__(self, name: str = "forward"):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        # A backward's builder: strides(v) of a forward value as the backends lay it out
        # (ir.layout.view_strides; None: unknown), for VJPs that pick eager's layout.
        self.forward_strides: Optional[Callable] = None

    # --- graph structure ------------------------------------------------------------------
    def input(self, name: str, type: TensorType) -> Value:
        value = Value(type, name)
        self.inputs.append(value)
        return value

    def build(self, outputs: Sequence[Value]) -> Graph:
        return Graph(self.name, self.inputs, self.nodes, list(outputs))

    def insert(self, op: OpDef, operands: Sequence[Value], attrs: dict,
               out_types: Optional[Sequence[TensorType]] = None, body: Optional[Graph] = None):
        """Append one node; infer its result types unless given.  Returns Value or tuple."""
        attrs = op.normalize_attrs(attrs)
        if out_types is None:
            inferred = op.infer([v.type for v in operands], **attrs)
            out_types = list(inferred) if isinstance(inferred, (tuple, list)) else [inferred]
        if not op.complex:
            for t in [v.type for v in operands] + list(out_types):
                if t.dtype.is_complex:
                    raise ComplexDTypeError(f"{op.name} takes no complex ({t.dtype}) values")
        if op.name != "aten":
            for t in [v.type for v in operands] + list(out_types):
                if t.dtype.extern_only:
                    raise ExternDTypeError(f"{op.name} takes no {t.dtype} values (only"
                                           " opaque aten calls do)")
        outputs = [Value(t) for t in out_types]
        self.nodes.append(Node(op, list(operands), attrs, outputs, body))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # --- op calls -------------------------------------------------------------------------
    def op(self, name: str, *operands, **attrs):
        """Apply op `name`.  Python scalars and mismatched shapes are handled for pointwise ops."""
        if name in ("full", "constant") and _is_complex_dtype(attrs.get("dtype")):
            return self._complex_creation(name, attrs)
        opdef = lookup(name)
        if opdef.variadic and len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        if opdef.category == POINTWISE:
            operands = self._pointwise_operands(operands)
        for v in operands:
            if not isinstance(v, Value):
                raise TypeError(f"{name}: operand {v!r} is not an IR value")
        return self.insert(opdef, operands, attrs)

    def _complex_creation(self, name: str, attrs: dict) -> Value:
        """A complex `full`/`constant` as `complex` of its real and imaginary parts: the
        creation ops hold real values (spec/ir.md, "Complex values")."""
        key = "value" if name == "full" else "data"
        parts = np.asarray(attrs[key], dtype=np.complex128)
        dtype = real_dtype(dtype_from_short(attrs["dtype"]) if isinstance(attrs["dtype"], str)
                          else attrs["dtype"])
        halves = [self.op(name, **{**attrs, key: part.tolist(), "dtype": dtype})
                  for part in (parts.real, parts.imag)]
        return self.op("complex", *halves)

    def __getattr__(self, name: str):
        if name.startswith("_") or not has_op(name):
            raise AttributeError(f"GraphBuilder has no op or method {name!r}")
        return lambda *operands, **attrs: self.op(name, *operands, **attrs)

    # --- conveniences used by decompositions and VJPs ---------------------------------------
    def scalar(self, value, like: Optional[TensorType] = None, dtype=None) -> Value:
        """A rank-0 constant.  Its dtype follows torch's weak-scalar rule against `like`."""
        if dtype is None:
            dtype = _weak_scalar_dtype(value, like)
        device = like.device if like is not None else "cpu"
        if isinstance(value, complex) or dtype.is_complex:  # `full` holds real values
            value, parts = complex(value), real_dtype(dtype)
            return self.op("complex", self.scalar(value.real, dtype=parts, like=like),
                           self.scalar(value.imag, dtype=parts, like=like))
        return self.op("full", value=value, shape=(), dtype=dtype, device=device)

    def zeros_like(self, x: Value) -> Value:
        return self.scalar(0, like=x.type, dtype=x.type.dtype)

    def transpose(self, x: Value, d0: int, d1: int) -> Value:
        perm = list(range(x.type.rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.op("permute", x, perm=perm)

    def broadcast_to(self, x: Value, shape) -> Value:
        """numpy broadcasting of x to shape: reshape to the rank, then expand."""
        shape = tuple(simplify_dim(d) for d in shape)
        if x.type.shape == shape:
            return x
        lead = len(shape) - x.type.rank
        if lead < 0:
            raise TypeError(f"cannot broadcast {x.type} to rank {len(shape)}")
        if lead:
            x = self.op("reshape", x, shape=[1] * lead + list(x.type.shape))
        if x.type.shape != shape:
            x = self.op("expand", x, shape=list(shape))
        return x

    def _pointwise_operands(self, operands) -> tuple:
        tensors = [v for v in operands if isinstance(v, Value)]
        like = _dominant_type(tensors)
        values = [v if isinstance(v, Value) else self.scalar(v, like) for v in operands]
        shapes = [v.type.shape for v in values if v.type.rank > 0]
        if len(set(shapes)) <= 1:
            return tuple(values)
        target = broadcast_shapes(*shapes)
        return tuple(v if v.type.rank == 0 else self.broadcast_to(v, target) for v in values)


def _is_complex_dtype(dtype) -> bool:
    if isinstance(dtype, str):
        dtype = dtype_from_short(dtype)
    return dtype is not None and dtype.is_complex


def _dominant_type(tensors: list[Value]) -> Optional[TensorType]:
    if not tensors:
        return None
    from ir.types import result_type

    dtype = result_type(*(v.type.dtype for v in tensors))
    return tensors[0].type.with_dtype(dtype)


def _weak_scalar_dtype(value, like: Optional[TensorType]):
    """torch: a Python scalar takes the tensor's dtype unless it is of a higher category."""
    if isinstance(value, complex):
        return complex_dtype(like.dtype) if like is not None and like.dtype.is_inexact else c64
    if like is not None and like.dtype.is_complex and not isinstance(value, bool):
        return real_dtype(like.dtype)  # promotes with the complex tensor to its dtype
    if isinstance(value, bool):
        return like.dtype if like is not None else bool_
    if isinstance(value, int):
        if like is None or like.dtype == bool_:
            return i64
        return like.dtype
    if like is None or not like.dtype.is_float:
        return DEFAULT_FLOAT
    return like.dtype
