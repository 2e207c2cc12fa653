"""Every op, by category.  Importing this package registers them all."""

from ir.ops import (  # noqa: F401
    complex,
    composite,
    creation,
    fused,
    layout,
    opaque,
    pointwise,
    reduction,
)
from ir.ops.registry import OpDef, all_ops, defop, has_op, lookup  # noqa: F401
