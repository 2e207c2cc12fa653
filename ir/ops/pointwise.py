"""Pointwise ops: elementwise maps of equal-shaped operands (rank-0 operands broadcast).

Each entry carries numpy reference semantics and a scalar form over the ScalarOps
vocabulary (ir/scalar.py) that every backend lowers.  Spec: spec/ops.md, "Pointwise".
"""

from __future__ import annotations

import math

import numpy as np

from ir.ops import rules
from ir.ops.registry import POINTWISE, defop
from ir.types import TensorType, dtype_from_short

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2 = 1.0 / math.sqrt(2.0)

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf_ref(x):
    return _erf(np.asarray(x, dtype=np.float64))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + erf_ref(x * INV_SQRT_2).astype(x.dtype))


def _gelu_scalar(s, x, approximate="none"):
    half, one = s.const(0.5, x), s.const(1.0, x)
    if approximate == "tanh":
        cube = s.mul(s.mul(x, x), x)
        inner = s.mul(s.const(SQRT_2_OVER_PI, x), s.add(x, s.mul(s.const(0.044715, x), cube)))
        return s.mul(s.mul(half, x), s.add(one, s.tanh(inner)))
    return s.mul(s.mul(half, x), s.add(one, s.erf(s.mul(x, s.const(INV_SQRT_2, x)))))


def _vjp_unary(rule):
    """VJP for a unary op given d(out)/d(x) as a builder expression."""
    return lambda b, g, out, x, **attrs: (b.mul(g, rule(b, out, x)),)


# --- unary ops whose result is the operand's dtype -------------------------------------
# name: (numpy ref, scalar form, vjp or None, doc)
_SAME_DTYPE_UNARY = {
    "neg": (np.negative, lambda s, x: s.neg(x),
            lambda b, g, out, x: (b.neg(g),), "-x"),
    "abs": (np.abs, lambda s, x: s.abs(x),
            lambda b, g, out, x: (b.mul(g, b.sign(x)),), "|x|"),
    "relu": (lambda x: np.maximum(x, np.zeros((), x.dtype)),
             lambda s, x: s.maximum(x, s.const(0, x)),
             lambda b, g, out, x: (b.where(b.gt(out, 0), g, b.zeros_like(g)),), "max(x, 0)"),
    "sign": (np.sign, lambda s, x: s.sign(x), None, "-1, 0 or 1 (NaN stays NaN)"),
    "floor": (np.floor, lambda s, x: s.floor(x), None, "round toward -inf (ints unchanged)"),
    "ceil": (np.ceil, lambda s, x: s.ceil(x), None, "round toward +inf (ints unchanged)"),
    "round": (np.round, lambda s, x: s.round(x), None, "round half to even"),
    "trunc": (np.trunc, lambda s, x: s.trunc(x), None, "round toward zero"),
}

# --- unary ops that compute in floating point (ints promote to the default float) -------
_FLOAT_UNARY = {
    "exp": (np.exp, lambda s, x: s.exp(x), _vjp_unary(lambda b, out, x: out), "e**x"),
    "log": (np.log, lambda s, x: s.log(x),
            _vjp_unary(lambda b, out, x: b.reciprocal(x)), "natural log"),
    "log1p": (np.log1p, lambda s, x: s.log1p(x), None, "log(1 + x), accurate near 0"),
    "expm1": (np.expm1, lambda s, x: s.expm1(x), None, "e**x - 1, accurate near 0"),
    "sqrt": (np.sqrt, lambda s, x: s.sqrt(x), None, "square root"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), lambda s, x: s.rsqrt(x), None, "1 / sqrt(x)"),
    "sin": (np.sin, lambda s, x: s.sin(x), _vjp_unary(lambda b, out, x: b.cos(x)), "sine"),
    "cos": (np.cos, lambda s, x: s.cos(x),
            _vjp_unary(lambda b, out, x: b.neg(b.sin(x))), "cosine"),
    "tanh": (np.tanh, lambda s, x: s.tanh(x),
             _vjp_unary(lambda b, out, x: b.sub(1.0, b.mul(out, out))), "hyperbolic tangent"),
    "sigmoid": (_sigmoid, lambda s, x: s.sigmoid(x),
                _vjp_unary(lambda b, out, x: b.mul(out, b.sub(1.0, out))), "1 / (1 + e**-x)"),
    "erf": (lambda x: erf_ref(x), lambda s, x: s.erf(x), None, "Gauss error function"),
    "silu": (lambda x: x * _sigmoid(x), lambda s, x: s.mul(x, s.sigmoid(x)), None,
             "x * sigmoid(x)"),
    "reciprocal": (lambda x: 1.0 / x, lambda s, x: s.truediv(s.const(1.0, x), x),
                   _vjp_unary(lambda b, out, x: b.neg(b.mul(out, out))), "1 / x"),
}

for _name, (_ref, _scalar, _vjp, _doc) in _SAME_DTYPE_UNARY.items():
    defop(_name, POINTWISE, operands=("x",), infer=rules.non_bool, ref=_ref, scalar=_scalar,
          vjp=_vjp, doc=_doc)

for _name, (_ref, _scalar, _vjp, _doc) in _FLOAT_UNARY.items():
    defop(_name, POINTWISE, operands=("x",), infer=rules.float_promoted, ref=_ref,
          scalar=_scalar, vjp=_vjp, doc=_doc)

GELU = defop(
    "gelu", POINTWISE, operands=("x",), attrs={"approximate": ("str", "none")},
    infer=rules.float_promoted, ref=_gelu, scalar=_gelu_scalar,
    doc="x * Phi(x); approximate='tanh' uses 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))",
)

defop("logical_not", POINTWISE, operands=("x",), infer=rules.to_bool,
      ref=np.logical_not, scalar=lambda s, x: s.logical_not(x), doc="x == 0")
defop("isnan", POINTWISE, operands=("x",), infer=rules.to_bool, ref=np.isnan,
      scalar=lambda s, x: s.isnan(x), doc="x != x")
defop("bitwise_not", POINTWISE, operands=("x",), infer=rules.integral_only,
      ref=np.invert, scalar=lambda s, x: s.bitwise_not(x), doc="~x (bool: logical not)")


# --- binary ops -------------------------------------------------------------------------
def _bin(name, infer, ref, scalar, vjp=None, doc=""):
    defop(name, POINTWISE, operands=("a", "b"), infer=infer, ref=ref, scalar=scalar,
          vjp=vjp, doc=doc)


_bin("add", rules.promoted, np.add, lambda s, a, b: s.add(a, b),
     lambda b, g, out, x, y: (g, g), "a + b")
_bin("sub", rules.non_bool, np.subtract, lambda s, a, b: s.sub(a, b),
     lambda b, g, out, x, y: (g, b.neg(g)), "a - b")
_bin("mul", rules.promoted, np.multiply, lambda s, a, b: s.mul(a, b),
     lambda b, g, out, x, y: (b.mul(g, y), b.mul(g, x)), "a * b")
_bin("div", rules.float_promoted, np.true_divide, lambda s, a, b: s.truediv(a, b),
     lambda b, g, out, x, y: (b.div(g, y), b.neg(b.div(b.mul(g, out), y))),
     "true division a / b (ints give floats)")
_bin("floor_divide", rules.non_bool, np.floor_divide, lambda s, a, b: s.floordiv(a, b),
     None, "floor(a / b)")
_bin("remainder", rules.non_bool, np.remainder, lambda s, a, b: s.remainder(a, b),
     None, "a - floor(a / b) * b (sign of b, like Python %)")
_bin("fmod", rules.non_bool, np.fmod, lambda s, a, b: s.fmod(a, b),
     None, "C fmod (sign of a)")
_bin("pow", rules.non_bool, np.power, lambda s, a, b: s.pow(a, b), None, "a ** b")
_bin("maximum", rules.promoted, np.maximum, lambda s, a, b: s.maximum(a, b), None,
     "elementwise max; NaN propagates")
_bin("minimum", rules.promoted, np.minimum, lambda s, a, b: s.minimum(a, b), None,
     "elementwise min; NaN propagates")
_bin("atan2", rules.float_promoted, np.arctan2, lambda s, a, b: s.atan2(a, b), None,
     "angle of (b, a)")

for _name, _ref in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                    "gt": np.greater, "ge": np.greater_equal}.items():
    _bin(_name, rules.to_bool, _ref, (lambda n: lambda s, a, b: s.compare(n, a, b))(_name),
         None, f"comparison {_name}")

for _name, _ref in {"logical_and": np.logical_and, "logical_or": np.logical_or,
                    "logical_xor": np.logical_xor}.items():
    _bin(_name, rules.to_bool, _ref,
         (lambda n: lambda s, a, b: getattr(s, n)(s.to_bool(a), s.to_bool(b)))(_name),
         None, f"{_name} on truthiness")

for _name, _ref in {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
                    "bitwise_xor": np.bitwise_xor}.items():
    _bin(_name, rules.integral_only, _ref,
         (lambda n: lambda s, a, b: getattr(s, n)(a, b))(_name), None, f"{_name} (ints, bool)")


# --- ternary and attribute ops ----------------------------------------------------------
def _where_infer(types):
    cond, a, b = types
    if not cond.dtype.is_bool:
        raise TypeError(f"where's condition must be bool, got {cond.dtype}")
    shape = rules.pointwise_shape(types)
    return TensorType(rules.promoted([a, b]).dtype, shape, rules.same_device(types))


WHERE = defop(
    "where", POINTWISE, operands=("cond", "a", "b"), infer=_where_infer,
    ref=lambda c, a, b: np.where(c, a, b),
    scalar=lambda s, c, a, b: s.where(c, a, b),
    vjp=lambda b, g, out, c, x, y: (None, b.where(c, g, b.zeros_like(g)),
                                    b.where(c, b.zeros_like(g), g)),
    doc="a where cond else b",
)


def _clamp_infer(types, min=None, max=None):
    return rules.non_bool(types)


def _clamp_ref(x, min=None, max=None):
    out = x
    if min is not None:
        out = np.maximum(out, np.asarray(min).astype(x.dtype))
    if max is not None:
        out = np.minimum(out, np.asarray(max).astype(x.dtype))
    return out


def _clamp_scalar(s, x, min=None, max=None):
    if min is not None:
        x = s.maximum(x, s.const(min, x))
    if max is not None:
        x = s.minimum(x, s.const(max, x))
    return x


defop("clamp", POINTWISE, operands=("x",),
      attrs={"min": ("scalar", None), "max": ("scalar", None)},
      infer=_clamp_infer, ref=_clamp_ref, scalar=_clamp_scalar,
      doc="min(max(x, min), max); a missing bound is not applied")


def _cast_infer(types, dtype):
    (x,) = types
    return x.with_dtype(dtype_from_short(dtype) if isinstance(dtype, str) else dtype)


def _cast_ref(x, dtype):
    target = dtype_from_short(dtype) if isinstance(dtype, str) else dtype
    if x.dtype.kind == "f" and target.is_int:
        # torch truncates toward zero; numpy's astype does the same for finite values.
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(target.np)
    return x.astype(target.np)


CAST = defop(
    "cast", POINTWISE, operands=("x",), attrs={"dtype": "dtype"},
    infer=_cast_infer, ref=_cast_ref, scalar=lambda s, x, dtype: s.cast(x, dtype),
    vjp=None, doc="convert to dtype (float -> int truncates toward zero; nonzero -> True)",
)
