"""Complex ops: the two views between a complex tensor and its float pairs, and the ops
only complex values have.  Spec: spec/ir.md, "Complex values".

The other ops with a complex form (add, mul, exp, sum, the views...) carry the `complex`
fact where they are defined.  Kernel backends run none of these: ir/passes/
complex_lowering.py rewrites complex values into float pairs first.
"""

from __future__ import annotations

import numpy as np

from ir.ops import rules
from ir.ops.registry import LAYOUT, POINTWISE, defop
from ir.types import TensorType, complex_dtype, f32, f64, real_dtype


def _complex_operand(types):
    """x's type, which must be complex."""
    (x,) = types
    if not x.dtype.is_complex:
        raise TypeError(f"needs a complex operand, got {x.dtype}")
    return x


def _parts_type(types):
    """x's parts' dtype (x must be complex), x's shape."""
    x = _complex_operand(types)
    return x.with_dtype(real_dtype(x.dtype))


def from_parts(re, im, dtype):
    """The complex array re + i im (not `re + 1j * im`: 1j * inf is nan + inf j)."""
    re, im = np.asarray(re), np.asarray(im)
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), dtype)
    out.real, out.imag = re, im
    return out


def _view_as_real_infer(types):
    """x's parts' dtype, x's shape with a trailing 2 (real, imaginary)."""
    x = _complex_operand(types)
    return TensorType(real_dtype(x.dtype), tuple(x.shape) + (2,), x.device)


def _view_as_complex_infer(types):
    """c64/c128 of an f32/f64 x whose last dim is 2; x's shape without it."""
    (x,) = types
    if x.dtype not in (f32, f64) or x.rank == 0 or x.shape[-1] != 2:
        raise TypeError(f"view_as_complex needs an f32 or f64 operand whose last dim is 2,"
                        f" got {x}")
    return TensorType(complex_dtype(x.dtype), tuple(x.shape[:-1]), x.device)


# Note [Complex views]: torch's view_as_real and view_as_complex reinterpret storage
# (strides x2 plus a last stride 1, and back), so in the IR they alias their operand like
# the six views; they are no index maps (the element type changes), so fusion never
# reads through them, and the kernel backends run them as torch views.
defop("view_as_real", LAYOUT, saves={}, aliases=True, complex=True, operands=("x",),
      infer=_view_as_real_infer, ref=lambda x: np.stack([x.real, x.imag], axis=-1),
      vjp=lambda b, g, out, x: (b.view_as_complex(g),),
      doc="a complex x as float pairs: out[..., 0] = x.real, out[..., 1] = x.imag (a view)")
defop("view_as_complex", LAYOUT, saves={}, aliases=True, complex=True, operands=("x",),
      infer=_view_as_complex_infer,
      ref=lambda x: from_parts(x[..., 0], x[..., 1], np.result_type(x.dtype, np.complex64)),
      vjp=lambda b, g, out, x: (b.view_as_real(g),),
      doc="float pairs as complex: out = x[..., 0] + i x[..., 1] (a view)")


def _complex_infer(types):
    """complex of the promoted real operands (f32 or f64), their shape."""
    out = rules.promoted(types)
    if any(not t.dtype.is_float for t in types) or out.dtype not in (f32, f64):
        raise TypeError(f"complex needs f32 or f64 parts, got {', '.join(map(str, types))}")
    return out.with_dtype(complex_dtype(out.dtype))


defop("complex", POINTWISE, saves={}, complex=True, operands=("re", "im"),
      infer=_complex_infer,
      ref=lambda re, im: from_parts(re, im, np.result_type(re.dtype, im.dtype, np.complex64)),
      doc="re + i im (torch.complex)")
defop("conj", POINTWISE, saves={}, complex=True, operands=("x",),
      infer=_complex_operand, ref=np.conj,
      doc="re - i im (torch.conj_physical)")
defop("angle", POINTWISE, saves={"x": ("x",)}, complex=True, operands=("x",),
      infer=_parts_type,
      ref=lambda x: np.angle(x).astype(x.real.dtype),
      doc="atan2(im, re) of a complex x, in [-pi, pi]")
