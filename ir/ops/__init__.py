"""Every op, by category.  Importing this package registers them all."""

from ir.ops import composite, creation, fused, layout, opaque, pointwise, reduction  # noqa: F401
from ir.ops.registry import OpDef, all_ops, defop, has_op, lookup  # noqa: F401
