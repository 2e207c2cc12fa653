"""The op registry: `OpDef`, `defop`, categories, lookup by name.

Owns: the data shape of an op and the table of all ops.  Holds no op definitions
(those live in ir/ops/<category>.py).  Spec: spec/ops.md, "Conventions".

An op is one registry entry (see STYLE.md section 2): its operands and attributes,
its type rule (`infer`), its reference semantics on numpy (`ref`), its
vector-Jacobian product (`vjp`, written with the IR builder), its scalar form
(`scalar`, pointwise ops only, lowered by every backend through ScalarOps) and a
category that fusion and codegen dispatch on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ir.types import dtype_from_short, simplify_dim

POINTWISE = "pointwise"
REDUCTION = "reduction"
LAYOUT = "layout"
CREATION = "creation"
EXTERN = "extern"
RANDOM = "random"
COMPOSITE = "composite"
FUSED = "fused"
CATEGORIES = (POINTWISE, REDUCTION, LAYOUT, CREATION, EXTERN, RANDOM, COMPOSITE, FUSED)

# Attribute kinds, checked by the verifier and understood by the parser.
# int, float, bool, str; ints: list of int; dims: list of int|sympy; dim: one int|sympy
# (a slice bound that may be a size expression); dtype: a DType; scalar: int|float|bool|None;
# optint: int|None; tensor: nested lists (constant data).
ATTR_KINDS = ("int", "float", "bool", "str", "ints", "dims", "dim", "dtype", "scalar",
              "optint", "tensor")

REQUIRED = object()


@dataclass(frozen=True)
class AttrSpec:
    kind: str
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class OpDef:
    """Everything refcomp knows about one op, in one place."""

    name: str
    category: str
    operands: tuple[str, ...]
    infer: Callable  # infer(types, **attrs) -> TensorType | tuple[TensorType, ...]
    ref: Callable  # ref(*arrays, **attrs) -> ndarray | tuple[ndarray, ...]
    attrs: dict = field(default_factory=dict)  # name -> AttrSpec
    vjp: Optional[Callable] = None  # vjp(b, grads, outs, *inputs, **attrs) -> input grads
    scalar: Optional[Callable] = None  # scalar(s, *operand_scalars, **attrs)
    effects: bool = False  # never removed, never merged (random draws, externs with effects)
    # Note [Op facts]: what a pass or backend needs to know about an op is a fact declared
    # once, here, and read where it matters, never a list of op names (the table of facts
    # and their readers: spec/ops.md, "Op facts").
    index_map: bool = False  # result[i] = operand0[f(i)] (Note [Op facts])
    aliases: bool = False  # the result is a view of operand 0's storage (Note [Op facts])
    complex: bool = False  # takes or makes complex values (spec/ir.md, "Complex values")
    variadic: bool = False  # operands is one name bound to a list (cat)
    doc: str = ""
    # What eager's backward of this op saves (Note [Saved by eager]): operand name -> the
    # operands ("result": the op's result) saved when that operand requires grad.  {}:
    # nothing; None: not recorded (every operand and the result count as saved).
    saves: Optional[dict] = None

    def __repr__(self) -> str:
        return f"OpDef({self.name})"

    def normalize_attrs(self, attrs: dict) -> dict:
        """Fill defaults and reject unknown or missing attributes."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            valid = ", ".join(self.attrs) or "none"
            raise ValueError(
                f"op {self.name!r} has no attribute(s) {sorted(unknown)}; valid: {valid}"
            )
        out = {}
        for name, spec in self.attrs.items():
            if name in attrs:
                out[name] = canonical_attr(attrs[name], spec.kind)
            elif spec.required:
                raise ValueError(f"op {self.name!r} requires attribute {name!r}")
            else:
                out[name] = spec.default
        return out


def canonical_attr(value, kind: str):
    """One representation per attribute value, so equal graphs compare and print equal."""
    if value is None:
        return None
    if kind in ("ints", "dims"):
        return tuple(simplify_dim(v) for v in value)
    if kind == "dim":
        return simplify_dim(value)
    if kind == "dtype" and isinstance(value, str):
        return dtype_from_short(value)
    if kind == "tensor" and hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # numpy scalar
        return value.item()
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


_REGISTRY: dict[str, OpDef] = {}


def defop(
    name: str,
    category: str,
    *,
    operands: tuple[str, ...],
    infer: Callable,
    ref: Callable,
    attrs: Optional[dict] = None,
    vjp: Optional[Callable] = None,
    scalar: Optional[Callable] = None,
    effects: bool = False,
    variadic: bool = False,
    doc: str = "",
    index_map: bool = False,
    aliases: bool = False,
    saves: Optional[dict] = None,
    complex: bool = False,
) -> OpDef:
    """Define and register an op.  `attrs` maps name -> kind or (kind, default)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; valid: {CATEGORIES}")
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is defined twice")
    specs = {}
    for attr_name, spec in (attrs or {}).items():
        kind, default = (spec, REQUIRED) if isinstance(spec, str) else spec
        if kind not in ATTR_KINDS:
            raise ValueError(f"op {name!r}: attribute kind {kind!r} not in {ATTR_KINDS}")
        specs[attr_name] = AttrSpec(kind, default)
    op = OpDef(name, category, tuple(operands), infer, ref, specs, vjp, scalar,
               effects=effects, index_map=index_map, aliases=aliases, variadic=variadic,
               doc=doc, saves=saves, complex=complex)
    _REGISTRY[name] = op
    return op


# Note [Saved by eager]: eager's autograd node for an op saves some of its operands or its
# result (torch/csrc/autograd/derivatives.yaml: the tensors each formula reads; an operand's
# formula is saved for only when that operand requires grad), and when that node's
# backward runs it raises "one of the variables needed for gradient computation has been
# modified by an inplace operation" if one of them was modified since.  `OpDef.saves`
# records that per op (every op with a VJP has it; None, not recorded, counts every
# operand and the result as saved: a raise eager may not have, never a missed one).
# refcomp/autograd.py uses it at graph boundaries: per output that requires grad, the
# graph inputs and outputs eager's nodes on its path would save (ir/autodiff.py,
# `eager_saved`; views of them count: they share the version counter) have their versions
# taken after each call, and a pre-hook on the output's grad_fn raises eager's error when
# its gradient arrives and one of them changed.  Inside a graph, an in-place op on a
# tensor an earlier op saved breaks the graph (RB010), so it runs in eager on an output.
# The facts are per IR op: a torch op the tracer builds from several IR ops is judged by
# those ops' saves unless its builder declares eager's (TraceContext.eager_saves: std,
# vector norms, leaky_relu, max/min(dim)), which count instead of the saves of the op that
# makes the declared result.
# `saves_all(...)`: every operand's gradient needs the same tensors.
RESULT = "result"


def saves_all(operands, saved) -> dict:
    """`saves` where the gradient of each of `operands` needs the tensors `saved`."""
    return {name: tuple(saved) for name in operands}


# Importing this module first runs ir/ops/__init__.py, which imports every category
# module: so the table is full before `lookup` can be called.
def lookup(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}") from None


def all_ops() -> list[OpDef]:
    return list(_REGISTRY.values())


def has_op(name: str) -> bool:
    return name in _REGISTRY
