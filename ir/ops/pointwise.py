"""Pointwise ops: elementwise maps of equal-shaped operands (rank-0 operands broadcast).

Each entry carries numpy reference semantics, a scalar form over the ScalarOps
vocabulary (ir/scalar.py) that every backend lowers, and, where the op is
differentiable and the rule is short, its VJP written with the IR builder.
Spec: spec/ops.md, "Pointwise"; precision: spec/ir.md, "Semantics".
"""

from __future__ import annotations

import math

import numpy as np

from ir.ops import rules
from ir.ops.registry import POINTWISE, RESULT, defop, saves_all
from ir.types import DEFAULT_FLOAT, DType, TensorType, bf16, bool_, dtype_from_short, f16, f32, i64

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2 = 1.0 / math.sqrt(2.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf_ref(x):
    return _erf(np.asarray(x, dtype=np.float64))


# Note [Reference precision]
# torch's CPU kernels evaluate f16/bf16 ops in float32 and round once ("opmath").  The
# reference does the same: `opmath` lifts f16 operands to f32 (bf16 is already stored
# as f32, see ir/types.py), and the interpreter rounds every result to the node's
# declared dtype.  Ops that compute in floating point lift ints and bool to f32 too, so
# numpy never picks float16 for an int8 operand.
def opmath(*arrays, to_float=False):
    """Operands cast to the dtype the reference computes in (see Note [Reference precision])."""
    common = np.result_type(*arrays)
    if common == np.float16 or (to_float and common.kind not in "fc"):
        common = np.dtype(np.float32)
    return [np.asarray(a).astype(common, copy=False) for a in arrays]


def _at_opmath(fn, to_float=False):
    def ref(*arrays, **attrs):
        return fn(*opmath(*arrays, to_float=to_float), **attrs)
    return ref


def _float_only(types, **_attrs):
    """promote(operands), which must be floating (no int kernel in torch); the operands' shape."""
    out = rules.promoted(types)
    if not out.dtype.is_float:
        raise TypeError(f"needs floating operands, got {out.dtype}")
    return out


def _ints_only(types, **_attrs):
    """promote(operands), which must be an integer (not bool); the operands' shape."""
    out = rules.promoted(types)
    if not out.dtype.is_int:
        raise TypeError(f"needs integer operands, got {out.dtype}")
    return out


# --- VJP helpers ------------------------------------------------------------------------
# A VJP takes (b, g, out, *inputs, **attrs) and returns one gradient per input (None for
# an input that is not differentiable: an integer or bool tensor, or a condition).
def grad_for(b, grad, x):
    """`grad` as the gradient of operand `x`: summed if x was a broadcast rank-0 operand,
    cast to x's dtype; None if x is not floating."""
    if not x.type.dtype.is_float:
        return None
    if x.type.rank == 0 and grad.type.rank > 0:
        grad = b.sum(grad)
    if grad.type.dtype != x.type.dtype:
        grad = b.cast(grad, dtype=x.type.dtype)
    return grad


def zeros(b, x):
    """A zero tensor of x's type (the gradient of a piecewise-constant op)."""
    return b.full(value=0.0, shape=list(x.type.shape), dtype=x.type.dtype,
                  device=x.type.device)


def _vjp_unary(rule):
    """VJP of a unary op from d(out)/d(x) written as a builder expression."""
    return lambda b, g, out, x, **attrs: (grad_for(b, b.mul(g, rule(b, out, x)), x),)


def _one_rounding(vjp, dtypes=(f16, bf16)):
    """`vjp` as eager's dedicated backward kernel computes it (tanh_backward,
    sigmoid_backward, silu_backward, gelu_backward): for operands of `dtypes` in f32
    ("opmath") and rounded once, not rounded after each op of the formula (1 bf16 ulp
    off eager's under torch.autocast).  (ATen's f16 sigmoid_backward rounds each op.)"""
    def rule(b, g, out, x, **attrs):
        dtype = x.type.dtype
        if dtype not in dtypes:
            return vjp(b, g, out, x, **attrs)
        (grad,) = vjp(b, *(b.cast(v, dtype=f32) for v in (g, out, x)), **attrs)
        return (None if grad is None else b.cast(grad, dtype=dtype),)
    return rule


def _vjp_zero(b, g, out, x, **attrs):
    return (zeros(b, x) if x.type.dtype.is_float else None,)


# --- reference helpers ------------------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _sign(x):
    # torch.sign(NaN) is 0, and a bool is its own sign.
    if x.dtype == np.bool_:
        return x.copy()
    if x.dtype.kind == "f":
        return np.where(np.isnan(x), np.zeros((), x.dtype), np.sign(x))
    return np.sign(x)


def _int_identity(fn):
    """Rounding ops leave integers alone (numpy would return float16 for int8)."""
    return lambda x: x.copy() if x.dtype.kind in "biu" else fn(x)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1.0 + erf_ref(x * INV_SQRT_2).astype(x.dtype))


def _gelu_infer(types, approximate="none"):
    """x's type, which must be floating; approximate is "none" or "tanh"."""
    if approximate not in ("none", "tanh"):
        raise TypeError(f"gelu's approximate must be 'none' or 'tanh', got {approximate!r}")
    return _float_only(types)


def _gelu_scalar(s, x, approximate="none"):
    half, one = s.const(0.5, x), s.const(1.0, x)
    if approximate == "tanh":
        cube = s.mul(s.mul(x, x), x)
        inner = s.mul(s.const(SQRT_2_OVER_PI, x), s.add(x, s.mul(s.const(0.044715, x), cube)))
        return s.mul(s.mul(half, x), s.add(one, s.tanh(inner)))
    return s.mul(s.mul(half, x), s.add(one, s.erf(s.mul(x, s.const(INV_SQRT_2, x)))))


def _gelu_vjp(b, g, out, x, approximate="none"):
    if approximate == "tanh":
        # d/dx 0.5x(1+t), t = tanh(u), u = c(x + k x^3): 0.5(1+t) + 0.5x(1-t^2)c(1+3k x^2)
        x2 = b.mul(x, x)
        u = b.mul(SQRT_2_OVER_PI, b.add(x, b.mul(0.044715, b.mul(x2, x))))
        t = b.tanh(u)
        du = b.mul(SQRT_2_OVER_PI, b.add(1.0, b.mul(3 * 0.044715, x2)))
        d = b.add(b.mul(0.5, b.add(1.0, t)),
                  b.mul(b.mul(b.mul(0.5, x), b.sub(1.0, b.mul(t, t))), du))
    else:
        # d/dx x Phi(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi)
        cdf = b.mul(0.5, b.add(1.0, b.erf(b.mul(x, INV_SQRT_2))))
        pdf = b.mul(INV_SQRT_2PI, b.exp(b.mul(b.mul(x, x), -0.5)))
        d = b.add(cdf, b.mul(x, pdf))
    return (grad_for(b, b.mul(g, d), x),)


# --- unary ops whose result has the operand's dtype -------------------------------------
# name: (infer, numpy ref, scalar form, vjp or None, doc)
_SAME_DTYPE_UNARY = {
    "neg": (rules.non_bool, np.negative, lambda s, x: s.neg(x),
            lambda b, g, out, x: (grad_for(b, b.neg(g), x),), "-x (ints wrap)"),
    "abs": (rules.abs_type, np.abs, lambda s, x: s.abs(x),
            _vjp_unary(lambda b, out, x: b.sign(x)), "|x|"),
    # ATen: x < 0 ? 0 : x, so relu(-0.0) is -0.0 and NaN stays NaN (not max(x, 0))
    "relu": (rules.non_bool, lambda x: np.where(x < 0, np.zeros((), x.dtype), x),
             lambda s, x: s.where(s.compare("lt", x, s.const(0, x)), s.const(0, x), x),
             # ATen's threshold_backward: out <= 0 ? 0 : g, so a NaN passes its gradient
             lambda b, g, out, x: (grad_for(b, b.where(b.le(out, 0), b.zeros_like(g), g), x),),
             "max(x, 0)"),
    "sign": (rules.promoted, _sign, lambda s, x: s.sign(x), _vjp_zero,
             "-1, 0 or 1; sign(NaN) = 0; bool unchanged"),
    "floor": (rules.non_bool, _int_identity(np.floor), lambda s, x: s.floor(x), _vjp_zero,
              "round toward -inf (ints unchanged)"),
    "ceil": (rules.non_bool, _int_identity(np.ceil), lambda s, x: s.ceil(x), _vjp_zero,
             "round toward +inf (ints unchanged)"),
    "round": (rules.non_bool, _int_identity(np.round), lambda s, x: s.round(x), _vjp_zero,
              "round half to even (ints unchanged)"),
    "trunc": (rules.non_bool, _int_identity(np.trunc), lambda s, x: s.trunc(x), _vjp_zero,
              "round toward zero (ints unchanged)"),
}

# --- unary ops that compute in floating point (ints and bool promote to f32) ------------
# name: (numpy ref, scalar form, vjp or None, doc)
_FLOAT_UNARY = {
    "exp": (np.exp, lambda s, x: s.exp(x), _vjp_unary(lambda b, out, x: out), "e**x"),
    "log": (np.log, lambda s, x: s.log(x),
            _vjp_unary(lambda b, out, x: b.reciprocal(x)), "natural log (x < 0: NaN)"),
    "log1p": (np.log1p, lambda s, x: s.log1p(x),
              _vjp_unary(lambda b, out, x: b.reciprocal(b.add(x, 1.0))),
              "log(1 + x), accurate near 0"),
    "expm1": (np.expm1, lambda s, x: s.expm1(x),
              _vjp_unary(lambda b, out, x: b.add(out, 1.0)), "e**x - 1, accurate near 0"),
    "sqrt": (np.sqrt, lambda s, x: s.sqrt(x),
             _vjp_unary(lambda b, out, x: b.div(0.5, out)), "square root (x < 0: NaN)"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), lambda s, x: s.rsqrt(x),
              _vjp_unary(lambda b, out, x: b.mul(-0.5, b.mul(out, b.mul(out, out)))),
              "1 / sqrt(x)"),
    "sin": (np.sin, lambda s, x: s.sin(x), _vjp_unary(lambda b, out, x: b.cos(x)), "sine"),
    "cos": (np.cos, lambda s, x: s.cos(x),
            _vjp_unary(lambda b, out, x: b.neg(b.sin(x))), "cosine"),
    "tanh": (np.tanh, lambda s, x: s.tanh(x),
             _one_rounding(_vjp_unary(lambda b, out, x: b.sub(1.0, b.mul(out, out)))),
             "hyperbolic tangent"),
    "sigmoid": (_sigmoid, lambda s, x: s.sigmoid(x),
                _one_rounding(lambda b, g, out, x: (  # ATen's order: g * (1 - y) * y
                    grad_for(b, b.mul(b.mul(g, b.sub(1.0, out)), out), x),), dtypes=(bf16,)),
                "1 / (1 + e**-x)"),
    "erf": (erf_ref, lambda s, x: s.erf(x),
            _vjp_unary(lambda b, out, x: b.mul(TWO_OVER_SQRT_PI, b.exp(b.neg(b.mul(x, x))))),
            "Gauss error function"),
    "reciprocal": (lambda x: 1.0 / x, lambda s, x: s.truediv(s.const(1.0, x), x),
                   _vjp_unary(lambda b, out, x: b.neg(b.mul(out, out))), "1 / x"),
}

# What eager's backward of each saves (Note [Saved by eager], ir/ops/registry.py):
# derivatives.yaml reads `result` for exp, tanh..., `self` for log, sin...
_UNARY_SAVES = {
    "neg": (), "abs": ("x",), "relu": (RESULT,), "sign": (), "floor": (), "ceil": (),
    "round": (), "trunc": (), "exp": (RESULT,), "log": ("x",), "log1p": ("x",),
    "expm1": (RESULT,), "sqrt": (RESULT,), "rsqrt": (RESULT,), "sin": ("x",), "cos": ("x",),
    "tanh": (RESULT,), "sigmoid": (RESULT,), "erf": ("x",), "reciprocal": (RESULT,),
}

# Ops whose complex form is defined (spec/ir.md, "Complex values"): the reference computes
# it with numpy's complex arithmetic, ir/passes/complex_lowering.py as float pairs.
_COMPLEX_OPS = frozenset({"neg", "abs", "exp", "add", "sub", "mul", "div", "eq", "ne"})

for _name, (_infer, _ref, _scalar, _vjp, _doc) in _SAME_DTYPE_UNARY.items():
    defop(_name, POINTWISE, operands=("x",), infer=_infer, ref=_at_opmath(_ref),
          scalar=_scalar, vjp=_vjp, doc=_doc, saves={"x": _UNARY_SAVES[_name]},
          complex=_name in _COMPLEX_OPS)

for _name, (_ref, _scalar, _vjp, _doc) in _FLOAT_UNARY.items():
    defop(_name, POINTWISE, operands=("x",), infer=rules.float_promoted,
          ref=_at_opmath(_ref, to_float=True), scalar=_scalar, vjp=_vjp, doc=_doc,
          saves={"x": _UNARY_SAVES[_name]}, complex=_name in _COMPLEX_OPS)


def _silu_vjp(b, g, out, x):
    s = b.sigmoid(x)  # d/dx x s(x) = s (1 + x (1 - s)); ATen's order: g * s * (...)
    return (grad_for(b, b.mul(b.mul(g, s), b.add(1.0, b.mul(x, b.sub(1.0, s)))), x),)


defop("silu", POINTWISE, saves={"x": ("x",)}, operands=("x",), infer=_float_only,
      ref=_at_opmath(lambda x: x * _sigmoid(x)), scalar=lambda s, x: s.mul(x, s.sigmoid(x)),
      vjp=_one_rounding(_silu_vjp), doc="x * sigmoid(x) (floating operands only)")
GELU = defop(
    "gelu", POINTWISE, operands=("x",), attrs={"approximate": ("str", "none")},
    saves={"x": ("x",)},
    infer=_gelu_infer, ref=_at_opmath(_gelu), scalar=_gelu_scalar, vjp=_one_rounding(_gelu_vjp),
    doc="x * Phi(x); approximate='tanh' uses 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))",
)

def _copy_infer(types):
    """x's type."""
    return types[0]


# Note [Copies]: the IR has no layouts, so `copy` changes no value; it stands where a
# torch-based backend would copy anyway (a matmul operand or a reshape that ATen cannot
# read as a view: ir/layout.py), so that copy is an IR value the partitioner can save
# and CSE can share (ir/passes/materialize.py).  Backends write it row-major.
defop("copy", POINTWISE, saves={}, operands=("x",), infer=_copy_infer, complex=True,
      ref=lambda x: np.array(x, copy=True), scalar=lambda s, x: x,
      vjp=lambda b, g, out, x: (g if x.type.dtype.is_float else None,),
      doc="x itself, written to a fresh row-major tensor (Note [Copies])")
# Note [Stopped gradients]: `stop_gradient` is where a value made by detach() or under
# no_grad feeds an op that records gradients (spectral_norm's power iteration feeding
# sigma): x's value, through which joint() passes no gradient (differentiable_values
# stops there, so no gradient reaches it and it needs no VJP).  The eager backend runs it
# as `x.detach()`, so autograd's op-by-op recording stops there too; the kernel backends
# compute x.
defop("stop_gradient", POINTWISE, saves={}, operands=("x",), infer=_copy_infer, complex=True,
      ref=lambda x: x, scalar=lambda s, x: x,
      doc="x, through which no gradient flows (torch's detach; Note [Stopped gradients])")
defop("logical_not", POINTWISE, operands=("x",), infer=rules.to_bool,
      ref=np.logical_not, scalar=lambda s, x: s.logical_not(x), doc="x == 0")
defop("isnan", POINTWISE, operands=("x",), infer=rules.to_bool, ref=np.isnan,
      scalar=lambda s, x: s.isnan(x), doc="x != x (always false for ints)")
defop("bitwise_not", POINTWISE, operands=("x",), infer=rules.integral_only,
      ref=np.invert, scalar=lambda s, x: s.bitwise_not(x), doc="~x (bool: logical not)")


# --- binary ops -------------------------------------------------------------------------
# What eager's backward of each saves (Note [Saved by eager], ir/ops/registry.py), from
# derivatives.yaml: mul's gradient of a reads b, div's of b reads a and b...
_BINARY_SAVES = {
    "add": {}, "sub": {}, "mul": {"a": ("b",), "b": ("a",)},
    "div": {"a": ("b",), "b": ("a", "b")}, "remainder": {"b": ("a", "b")},
    # ATen's div(rounding_mode=...) formulas name other (and self for other's gradient)
    "div_floor": {"a": ("b",), "b": ("a", "b")},
    "fmod": {"b": ("a", "b")}, "pow": {"a": ("a", "b"), "b": ("a", "b", RESULT)},
    "maximum": saves_all(("a", "b"), ("a", "b")), "minimum": saves_all(("a", "b"), ("a", "b")),
    "atan2": saves_all(("a", "b"), ("a", "b")),
}


def _bin(name, infer, ref, scalar, vjp=None, doc="", to_float=False):
    defop(name, POINTWISE, operands=("a", "b"), infer=infer,
          ref=_at_opmath(ref, to_float=to_float), scalar=scalar, vjp=vjp, doc=doc,
          saves=_BINARY_SAVES.get(name), complex=name in _COMPLEX_OPS)


def _grads(b, x, y, gx, gy):
    return grad_for(b, gx, x), grad_for(b, gy, y)


def _pow_vjp(b, g, out, x, y):
    # torch: d/dx = 0 where y == 0; d/dy = 0 where x == 0 and y >= 0 (no 0 * log 0 = NaN).
    gx = b.where(b.eq(y, 0), 0.0, b.mul(g, b.mul(y, b.pow(x, b.sub(y, 1.0)))))
    zero_base = b.logical_and(b.eq(x, 0), b.ge(y, 0))
    gy = b.where(zero_base, 0.0, b.mul(g, b.mul(out, b.log(x))))
    return _grads(b, x, y, gx, gy)


def _extremum_vjp(pick):
    """maximum/minimum: the gradient goes to the chosen operand; ties split it (as torch)."""
    def vjp(b, g, out, x, y):
        half = b.mul(g, 0.5)
        gx = b.where(b.op(pick, x, y), g, b.where(b.eq(x, y), half, 0.0))
        gy = b.where(b.op(pick, y, x), g, b.where(b.eq(x, y), half, 0.0))
        return _grads(b, x, y, gx, gy)
    return vjp


def _atan2_vjp(b, g, out, x, y):
    # d atan2(x, y) = (y dx - x dy) / (x^2 + y^2), as ATen's atan2_backward computes it:
    # a reciprocal that is 0 where x^2 + y^2 is 0, so both gradients are 0 at (0, 0),
    # not 0 * inf = NaN (tests/training/test_vjp_edges.py).
    r2 = b.add(b.mul(x, x), b.mul(y, y))
    recip = b.where(b.eq(r2, 0.0), 0.0, b.op("reciprocal", r2))
    return _grads(b, x, y, b.mul(b.mul(g, y), recip), b.mul(b.mul(g, b.neg(x)), recip))


_bin("add", rules.promoted, np.add, lambda s, a, b: s.add(a, b),
     lambda b, g, out, x, y: _grads(b, x, y, g, g), "a + b")
_bin("sub", rules.non_bool, np.subtract, lambda s, a, b: s.sub(a, b),
     lambda b, g, out, x, y: _grads(b, x, y, g, b.neg(g)), "a - b")
_bin("mul", rules.promoted, np.multiply, lambda s, a, b: s.mul(a, b),
     lambda b, g, out, x, y: _grads(b, x, y, b.mul(g, y), b.mul(g, x)), "a * b")
def true_divide(a, b):
    """a / b; complex operands as torch's c10 division: scaled by s = max(|br|, |bi|), and
    (ar / |br|, ai / |bi|) where s is 0 (1 / 0j is inf + inf j; numpy's is inf + nan j)."""
    if np.asarray(a).dtype.kind != "c" and np.asarray(b).dtype.kind != "c":
        return np.true_divide(a, b)
    dtype = np.result_type(a, b)
    a, b = np.asarray(a).astype(dtype), np.asarray(b).astype(dtype)
    s = np.maximum(np.abs(b.real), np.abs(b.imag))
    zero = s == 0
    safe = np.where(zero, np.ones((), s.dtype), s)
    c, d = b.real / safe, b.imag / safe
    scale = (c * c + d * d) * safe
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype)
    out.real = np.where(zero, a.real / np.abs(b.real), (a.real * c + a.imag * d) / scale)
    out.imag = np.where(zero, a.imag / np.abs(b.imag), (a.imag * c - a.real * d) / scale)
    return out


_bin("div", rules.float_promoted, true_divide, lambda s, a, b: s.truediv(a, b),
     # b's gradient is ATen's -g * ((a / b) / b): from the operands eager saves, not from
     # the result, which the caller may change in place (Note [Saved by eager])
     lambda b, g, out, x, y: _grads(b, x, y, b.div(g, y),
                                    b.neg(b.mul(g, b.div(b.div(x, y), y)))),
     "true division a / b (ints give floats); torch.true_divide", to_float=True)
_bin("floor_divide", rules.non_bool, np.floor_divide, lambda s, a, b: s.floordiv(a, b),
     None, "floor(a / b); integer division by zero is undefined (torch raises)")
_bin("div_floor", rules.non_bool, np.floor_divide, lambda s, a, b: s.floordiv(a, b),
     # ATen's div(rounding_mode=...) backward: zeros for both operands (not g * 0)
     lambda b, g, out, x, y: _grads(b, x, y, zeros(b, x), zeros(b, y)),
     "torch.div(a, b, rounding_mode='floor'): floor_divide's values, with a zero gradient"
     " (torch.floor_divide itself has none: eager raises under autograd)")
_bin("remainder", rules.non_bool, np.remainder, lambda s, a, b: s.remainder(a, b),
     lambda b, g, out, x, y: _grads(b, x, y, g, b.neg(b.mul(g, b.floor_divide(x, y)))),
     "a - floor(a / b) * b (sign of b, like Python %)")
_bin("fmod", rules.non_bool, np.fmod, lambda s, a, b: s.fmod(a, b),
     lambda b, g, out, x, y: _grads(b, x, y, g, b.neg(b.mul(g, b.trunc(b.div(x, y))))),
     "a - trunc(a / b) * b (C fmod, sign of a)")
def pow_ref(a, b):
    """np.power, except an integer to a negative integer power, which numpy refuses:
    torch gives 1 for base 1, +-1 for base -1 by the exponent's parity, else 0."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu" or not (b < 0).any():
        return np.power(a, b)
    one = np.ones((), a.dtype)
    base_minus_one = np.where(b % 2 == 0, one, -one)
    small = np.where(a == 1, one, np.where(a == -1, base_minus_one, np.zeros((), a.dtype)))
    return np.where(b < 0, small, np.power(a, np.maximum(b, 0)))


_bin("pow", rules.non_bool, pow_ref, lambda s, a, b: s.pow(a, b), _pow_vjp,
     "a ** b (integer b must be >= 0)")
_bin("maximum", rules.promoted, np.maximum, lambda s, a, b: s.maximum(a, b),
     _extremum_vjp("gt"), "elementwise max; NaN propagates")
_bin("minimum", rules.promoted, np.minimum, lambda s, a, b: s.minimum(a, b),
     _extremum_vjp("lt"), "elementwise min; NaN propagates")
_bin("atan2", rules.float_promoted, np.arctan2, lambda s, a, b: s.atan2(a, b), _atan2_vjp,
     "angle of the point (b, a), in [-pi, pi]", to_float=True)

for _name, _ref in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                    "gt": np.greater, "ge": np.greater_equal}.items():
    _bin(_name, rules.to_bool, _ref, (lambda n: lambda s, a, b: s.compare(n, a, b))(_name),
         None, f"comparison {_name} in the promoted dtype (NaN compares unequal)")

for _name, _ref in {"logical_and": np.logical_and, "logical_or": np.logical_or,
                    "logical_xor": np.logical_xor}.items():
    _bin(_name, rules.to_bool, _ref,
         (lambda n: lambda s, a, b: getattr(s, n)(s.to_bool(a), s.to_bool(b)))(_name),
         None, f"{_name} of (a != 0, b != 0)")

for _name, _ref in {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
                    "bitwise_xor": np.bitwise_xor}.items():
    _bin(_name, rules.integral_only, _ref,
         (lambda n: lambda s, a, b: getattr(s, n)(a, b))(_name), None, f"{_name} (ints, bool)")


def _shift_left(a, s):
    # torch: a shift outside [0, bits) gives 0.
    bits = a.dtype.itemsize * 8
    inside = (s >= 0) & (s < bits)
    shifted = np.left_shift(a, np.where(inside, s, 0).astype(a.dtype))
    return np.where(inside, shifted, np.zeros((), a.dtype))


def _shift_right(a, s):
    # torch: a shift outside [0, bits) gives the sign fill (-1 for negative a, else 0).
    bits = a.dtype.itemsize * 8
    inside = (s >= 0) & (s < bits)
    shifted = np.right_shift(a, np.where(inside, s, 0).astype(a.dtype))
    fill = np.where(a < 0, np.asarray(-1).astype(a.dtype), np.zeros((), a.dtype))
    return np.where(inside, shifted, fill)


_bin("bitwise_left_shift", _ints_only, _shift_left,
     lambda s, a, b: s.bitwise_left_shift(a, b), None,
     "a << b, wrapping; b outside [0, bits) gives 0 (torch.bitwise_left_shift)")
_bin("bitwise_right_shift", _ints_only, _shift_right,
     lambda s, a, b: s.bitwise_right_shift(a, b), None,
     "a >> b, arithmetic for signed; b outside [0, bits) gives -1 if a < 0 else 0")


# --- ternary and attribute ops ----------------------------------------------------------
def _where_infer(types):
    """promote(a, b), the operands' shape; cond must be bool."""
    cond, a, b = types
    if not cond.dtype.is_bool:
        raise TypeError(f"where's condition must be bool, got {cond.dtype}")
    shape = rules.pointwise_shape(types)
    return TensorType(rules.promoted([a, b]).dtype, shape, rules.same_device(types))


def _where_vjp(b, g, out, c, x, y):
    return (None, grad_for(b, b.where(c, g, 0.0), x), grad_for(b, b.where(c, 0.0, g), y))


WHERE = defop(
    "where", POINTWISE, operands=("cond", "a", "b"), infer=_where_infer, complex=True,
    saves={"a": ("cond",), "b": ("cond",)},
    ref=lambda c, a, b: np.where(c, *opmath(a, b)),
    scalar=lambda s, c, a, b: s.where(c, a, b), vjp=_where_vjp,
    doc="a where cond else b (cond is bool)",
)


def weak_promote(dtype: DType, value) -> DType:
    """torch's rule for a Python scalar beside a tensor: it changes the result dtype only
    when it is of a higher category (bool < int < float), to that category's default."""
    if value is None or isinstance(value, bool):
        return dtype
    if isinstance(value, int):
        return i64 if dtype == bool_ else dtype
    return dtype if dtype.is_float else DEFAULT_FLOAT


def _clamp_infer(types, min=None, max=None):
    """x's dtype weakly promoted by the bounds (int x, float bound: f32); one bound at least."""
    if min is None and max is None:
        raise TypeError("clamp needs at least one of min and max")
    (x,) = types
    dtype = weak_promote(weak_promote(x.dtype, min), max)
    if dtype == bool_:
        raise TypeError("clamp is not defined for bool tensors with bool bounds")
    return x.with_dtype(dtype)


def _clamp_ref(x, min=None, max=None):
    # The result dtype per weak_promote, computed like torch: x cast first, then bounded.
    if x.dtype.kind in "biu" and any(isinstance(v, float) for v in (min, max)):
        x = x.astype(np.float32)
    elif x.dtype == np.bool_:
        x = x.astype(np.int64)
    (x,) = opmath(x)
    for bound, outside in ((min, np.less), (max, np.greater)):
        if bound is not None:
            b = np.asarray(bound).astype(x.dtype)
            x = np.where(outside(x, b) | np.isnan(b), b, x) if x.dtype.kind == "f" \
                else np.where(outside(x, b), b, x)
    return x


def _clamp_scalar(s, x, min=None, max=None):
    # ATen's clamp keeps x where it is not outside a bound (clamp(-0.0, min=0.0) is -0.0,
    # a NaN x stays NaN) and a NaN bound gives NaN
    for bound, outside in ((min, "lt"), (max, "gt")):
        if bound is None:
            continue
        if isinstance(bound, float) and math.isnan(bound):
            x = s.const(bound, x)
        else:
            b = s.const(bound, x)
            x = s.where(s.compare(outside, x, b), b, x)
    return x


def _clamp_vjp(b, g, out, x, min=None, max=None):
    # torch: the gradient passes where min <= x <= max (bounds included).
    inside = None
    for test in ([b.ge(x, min)] if min is not None else []) + \
            ([b.le(x, max)] if max is not None else []):
        inside = test if inside is None else b.logical_and(inside, test)
    return (grad_for(b, b.where(inside, g, 0.0), x),)


defop("clamp", POINTWISE, saves={"x": ("x",)}, operands=("x",),
      attrs={"min": ("scalar", None), "max": ("scalar", None)},
      infer=_clamp_infer, ref=_clamp_ref, scalar=_clamp_scalar, vjp=_clamp_vjp,
      doc="min(max(x, min), max); a missing bound is not applied; scalars promote weakly")


def _target(dtype) -> DType:
    return dtype_from_short(dtype) if isinstance(dtype, str) else dtype


def _cast_infer(types, dtype):
    """the given dtype, x's shape."""
    (x,) = types
    return x.with_dtype(_target(dtype))


def _cast_ref(x, dtype):
    target = _target(dtype)
    if x.dtype.kind == "c" and not target.is_complex:  # torch keeps the real part
        x = (x != 0) if target.is_bool else x.real
    if x.dtype.kind == "f" and target.is_int:
        return _float_to_int(x, target)
    return x.astype(target.np)


def _float_to_int(x, target):
    """torch's CPU cast (C++ `static_cast` on x86): truncate toward zero into int64 (for
    an int64 or unsigned result) or int32 (every other), whose value for NaN and
    out-of-range inputs is that type's minimum, then keep the low bits: `300.0` -> int8
    44, `-2.5` -> uint8 254, NaN -> int32 -2147483648 (Note [Float to int as eager's CPU
    kernel], codegen/llvm/scalar.py)."""
    wide = np.int64 if target.bits == 64 or target.kind == "uint" else np.int32
    lo = np.iinfo(wide).min
    t = np.trunc(np.asarray(x, dtype=np.float64))
    ok = (t >= lo) & (t < -float(lo))  # False for NaN
    return np.where(ok, np.where(ok, t, 0).astype(wide), wide(lo)).astype(target.np)


def _cast_vjp(b, g, out, x, dtype):
    if not (x.type.dtype.is_inexact and _target(dtype).is_inexact):
        return (None,)
    return (b.cast(g, dtype=x.type.dtype),)


CAST = defop(
    "cast", POINTWISE, saves={}, operands=("x",), attrs={"dtype": "dtype"}, complex=True,
    infer=_cast_infer, ref=_cast_ref, scalar=lambda s, x, dtype: s.cast(x, dtype),
    vjp=_cast_vjp,
    doc="convert to dtype (float -> int truncates toward zero into int64 for 64-bit and"
        " unsigned results, else int32, NaN and out-of-range giving that type's minimum,"
        " then wraps, as torch's CPU casts; nonzero -> True; ints wrap)",
)
