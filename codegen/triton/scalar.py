"""ScalarOps for Triton: the scalar vocabulary as `tl.*` expressions in generated source.

Owns: `TritonScalarOps` (one method per name in SCALAR_VOCABULARY, on typed
expressions `TV(expr, dtype)`), `tl_dtype` (refcomp dtype -> `tl.<name>`),
`literal` (a Python value as Triton source), the `@triton.jit` helper functions
(`HELPERS`, emitted into a kernel's module only when it uses them, `_to_bf16`
among them) and the reduction combiners (`combiner`).  Must not know: Kernels,
graphs, launching.  Spec: spec/codegen.md, "Triton".

Semantics are the ops' refs (ir/ops), as the LLVM backend's are.

Note [tl.math only]: Triton 3.9's interpreter raises NotImplementedError for
`extern_elementwise`, so `tl.extra.cuda.libdevice` (tanh, pow, log1p, expm1, atan2,
rint, trunc) cannot be tested here; those are written with the functions it does run,
so every kernel CI runs under `TRITON_INTERPRET=1` is the kernel a GPU runs.  The
formulas: spec/codegen.md, "Triton" (the scalar vocabulary table).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from codegen.scalar import compute_dtype
from ir.types import DType, bool_


class TV(NamedTuple):
    """A typed Triton expression: its source text and its (compute) dtype."""

    expr: str
    dtype: DType


_TL_NAMES = {"bool": "int1", "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32",
             "i64": "int64", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
             "f64": "float64"}


def tl_dtype(dtype: DType) -> str:
    """`tl.float32` for f32, `tl.int1` for bool, ..."""
    return "tl." + _TL_NAMES[dtype.short]


def literal(value, dtype: DType) -> str:
    """`value` as a Python literal of dtype's kind (inf and NaN spelled `float("inf")`)."""
    if dtype.is_bool:
        return "True" if value else "False"
    if dtype.is_float:
        value = float(value)
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    return str(int(value))


# --- helpers emitted into generated modules ------------------------------------------------

HELPERS = {
    "floordiv_int": '''
@triton.jit
def _floordiv_int(a, b):
    # Python's a // b (rounds toward -inf); b == 0 gives 0, as numpy does.
    zero = b == 0
    d = tl.where(zero, 1, b)
    q = a // d
    r = a % d
    q = tl.where((r != 0) & ((r < 0) != (d < 0)), q - 1, q)
    return tl.where(zero, 0, q)
''',
    "floordiv_float": '''
@triton.jit
def _floordiv_float(a, b):
    # numpy's floor division: from the exact remainder, not floor(a / b), whose
    # rounded quotient can land on the integer above (-0.5 // 1e-6 is -500001).
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0.0) & ((b < 0.0) != (mod < 0.0)), div - 1.0, div)
    q = tl.math.floor(div)
    q = tl.where(div - q > 0.5, q + 1.0, q)
    return tl.where(b == 0.0, a / b, q)
''',
    "fmod_int": '''
@triton.jit
def _fmod_int(a, b):
    # C's a % b (sign of a); b == 0 gives 0, as numpy does.
    zero = b == 0
    return tl.where(zero, 0, a % tl.where(zero, 1, b))
''',
    "remainder_int": '''
@triton.jit
def _remainder_int(a, b):
    # Python's a % b (sign of b); b == 0 gives 0, as numpy does.
    r = _fmod_int(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
''',
    "remainder_float": '''
@triton.jit
def _remainder_float(a, b):
    # Python's a % b (sign of b) from C's fmod (sign of a).
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
''',
    "expm1": '''
@triton.jit
def _expm1(x):
    # Kahan: (u - 1) * x / log(u) cancels the rounding error of u = exp(x) near 0.
    u = tl.exp(x)
    um1 = u - 1.0
    r = um1 * x / tl.log(u)
    r = tl.where(um1 == -1.0, -1.0, r)
    r = tl.where(u == 1.0, x, r)
    return tl.where(u == float("inf"), u, r)
''',
    "log1p": '''
@triton.jit
def _log1p(x):
    # Kahan: log(u) * x / (u - 1) with u = 1 + x is exact to a few ulps near 0.
    u = 1.0 + x
    r = tl.log(u) * x / (u - 1.0)
    r = tl.where(u == 1.0, x, r)
    return tl.where(u == float("inf"), u, r)
''',
    "tanh": '''
@triton.jit
def _tanh(x):
    # tanh|x| = -expm1(-2|x|) / (2 + expm1(-2|x|)): no cancellation near 0, 1 for large |x|.
    e = _expm1(-2.0 * tl.abs(x))
    t = -e / (2.0 + e)
    return tl.where(x < 0.0, -t, t)
''',
    "pow": '''
@triton.jit
def _pow(a, b):
    # a ** b = exp2(b * log2|a|), negated for a < 0 and odd integer b, NaN for a < 0 and
    # fractional b; 1 when b == 0 or a == 1 (also for NaN operands, as numpy).
    r = tl.math.exp2(b * tl.math.log2(tl.abs(a)))
    b_int = tl.math.floor(b) == b
    b_odd = b_int & ((b - 2.0 * tl.math.floor(0.5 * b)) != 0.0)
    r = tl.where(a < 0.0, tl.where(b_int, tl.where(b_odd, -r, r), float("nan")), r)
    return tl.where((b == 0.0) | (a == 1.0), 1.0, r)
''',
    "atan2": '''
@triton.jit
def _atan2(y, x):
    # atan of t = min/max in [0, 1] (Cephes atanf: t > tan(pi/8) uses
    # atan(t) = pi/4 + atan((t - 1) / (t + 1))), then moved to the octant of (x, y).
    ax = tl.abs(x)
    ay = tl.abs(y)
    hi = tl.maximum(ax, ay)
    lo = tl.minimum(ax, ay)
    t = tl.where(hi == 0.0, 0.0, lo / tl.where(hi == 0.0, 1.0, hi))
    big = t > 0.41421356237309503
    s = tl.where(big, (t - 1.0) / (t + 1.0), t)
    z = s * s
    p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
         - 3.33329491539e-1) * z * s + s
    r = tl.where(big, 0.7853981633974483 + p, p)
    r = tl.where(ay > ax, 1.5707963267948966 - r, r)
    r = tl.where(x < 0.0, 3.141592653589793 - r, r)
    r = tl.where(y < 0.0, -r, r)
    return tl.where((x != x) | (y != y), x + y, r)
''',
    "round": '''
@triton.jit
def _round_half_even(x):
    # floor, then up when the fraction is above 1/2, or exactly 1/2 and floor is odd.
    r = tl.math.floor(x)
    d = x - r
    odd = (r - 2.0 * tl.math.floor(0.5 * r)) != 0.0
    return tl.where((d > 0.5) | ((d == 0.5) & odd), r + 1.0, r)
''',
    "to_bf16": '''
@triton.jit
def _to_bf16(x):
    # f32 -> bf16 rounding to nearest even, written out because Triton's interpreter
    # truncates (a GPU's cvt.rn.bf16.f32 gives the same bits).
    bits = x.to(tl.uint32, bitcast=True)
    bits = bits + (0x7FFF + ((bits >> 16) & 1))
    rounded = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.where(x != x, float("nan"), rounded)
''',
    "max_nan": '''
@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "min_nan": '''
@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "sum": '''
@triton.jit
def _sum(a, b):
    return a + b


_sum_tree = _sum  # a tl.reduce's add (Note [Interpreted sums], codegen/triton/launch.py)
''',
    "prod": '''
@triton.jit
def _prod(a, b):
    return a * b
''',
    "any": '''
@triton.jit
def _any(a, b):
    return a | b
''',
    "all": '''
@triton.jit
def _all(a, b):
    return a & b
''',
    "max_int": '''
@triton.jit
def _max_int(a, b):
    return tl.maximum(a, b)
''',
    "min_int": '''
@triton.jit
def _min_int(a, b):
    return tl.minimum(a, b)
''',
}

# Helpers that call other helpers.
HELPER_DEPENDS = {"remainder_int": ("fmod_int",), "tanh": ("expm1",)}


def combiner(op: str, dtype: DType) -> str:
    """The helper (a key of HELPERS) folding two partial results of reduction `op`."""
    if dtype.is_bool:
        return {"sum": "any", "max": "any", "any": "any", "prod": "all", "min": "all",
                "all": "all"}[op]
    if op in ("max", "min"):
        return f"{op}_{'nan' if dtype.is_float else 'int'}"
    return op


def helper_name(key: str) -> str:
    """The Python name of HELPERS[key] in generated source."""
    return "_round_half_even" if key == "round" else "_" + key


# --- the vocabulary -------------------------------------------------------------------------


class TritonScalarOps:
    """The vocabulary as Triton expressions.  `helpers` collects the HELPERS keys used.

    Unsupported (dtype, op) pairs raise NotImplementedError (the kernel then falls back).
    """

    def __init__(self):
        self.helpers: set = set()
        # The block shape constants are made in, set by the emitter per stage ([1] or
        # [1, 1]): Triton's interpreter mishandles some ops between 0-d scalars and
        # blocks (`|` fails); a size-1 block broadcasts like a scalar and costs nothing.
        self.block_shape = "[]"

    def _helper(self, key: str, *args: TV) -> TV:
        self.helpers.add(key)
        self.helpers.update(HELPER_DEPENDS.get(key, ()))
        return TV(f"{helper_name(key)}({', '.join(a.expr for a in args)})", args[0].dtype)

    def _float_only(self, name: str, x: TV):
        if not x.dtype.is_float:
            raise NotImplementedError(f"{name} on {x.dtype} (operands are cast to float first)")

    # --- conventions that differ from f(*operands) (see codegen/scalar.py) ----------------
    def const(self, value, like: TV) -> TV:
        return TV(f"tl.full({self.block_shape}, {literal(value, like.dtype)},"
                  f" {tl_dtype(like.dtype)})", like.dtype)

    def cast(self, x: TV, dtype: DType) -> TV:
        dst = compute_dtype(dtype)
        if dst == x.dtype:
            return x
        if dst.is_bool:
            return self.to_bool(x)
        return TV(f"{x.expr}.to({tl_dtype(dst)})", dst)

    def to_bool(self, x: TV) -> TV:
        return x if x.dtype.is_bool else TV(f"({x.expr} != 0)", bool_)

    def compare(self, name: str, a: TV, b: TV) -> TV:
        symbol = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[name]
        return TV(f"({a.expr} {symbol} {b.expr})", bool_)

    def where(self, c: TV, a: TV, b: TV) -> TV:
        return TV(f"tl.where({c.expr}, {a.expr}, {b.expr})", a.dtype)

    # --- arithmetic ---------------------------------------------------------------------
    def _binary(self, a: TV, b: TV, symbol: str) -> TV:
        return TV(f"({a.expr} {symbol} {b.expr})", a.dtype)

    def add(self, a, b):
        return self._binary(a, b, "|" if a.dtype.is_bool else "+")

    def sub(self, a, b):
        return self._binary(a, b, "-")

    def mul(self, a, b):
        return self._binary(a, b, "&" if a.dtype.is_bool else "*")

    def truediv(self, a, b):
        self._float_only("truediv", a)
        return self._binary(a, b, "/")

    def floordiv(self, a, b):
        return self._helper("floordiv_float" if a.dtype.is_float else "floordiv_int", a, b)

    def remainder(self, a, b):
        return self._helper("remainder_float" if a.dtype.is_float else "remainder_int", a, b)

    def fmod(self, a, b):
        if a.dtype.is_float:
            return self._binary(a, b, "%")  # frem: C's fmod
        return self._helper("fmod_int", a, b)

    def pow(self, a, b):
        self._float_only("pow", a)
        return self._helper("pow", a, b)

    def neg(self, x):
        return TV(f"(-{x.expr})", x.dtype)

    def abs(self, x):
        if x.dtype.is_bool or x.dtype.kind == "uint":
            return x
        return TV(f"tl.abs({x.expr})", x.dtype)

    def sign(self, x):
        if x.dtype.is_float:  # sign(NaN) = 0, as torch (the op's ref)
            return TV(f"tl.where({x.expr} > 0.0, 1.0, tl.where({x.expr} < 0.0, -1.0, 0.0))"
                      f".to({tl_dtype(x.dtype)})", x.dtype)
        t = tl_dtype(x.dtype)
        return TV(f"(({x.expr} > 0).to({t}) - ({x.expr} < 0).to({t}))", x.dtype)

    def floor(self, x):
        return TV(f"tl.math.floor({x.expr})", x.dtype) if x.dtype.is_float else x

    def ceil(self, x):
        return TV(f"tl.math.ceil({x.expr})", x.dtype) if x.dtype.is_float else x

    def round(self, x):
        return self._helper("round", x) if x.dtype.is_float else x

    def trunc(self, x):
        if not x.dtype.is_float:
            return x
        return TV(f"tl.where({x.expr} < 0.0, tl.math.ceil({x.expr}),"
                  f" tl.math.floor({x.expr}))", x.dtype)

    # --- transcendentals ----------------------------------------------------------------
    def _math(self, name: str, x: TV) -> TV:
        self._float_only(name, x)
        return TV(f"tl.math.{name}({x.expr})", x.dtype)

    def exp(self, x):
        return self._math("exp", x)

    def log(self, x):
        return self._math("log", x)

    def sqrt(self, x):
        return self._math("sqrt", x)

    def rsqrt(self, x):
        return self._math("rsqrt", x)

    def sin(self, x):
        return self._math("sin", x)

    def cos(self, x):
        return self._math("cos", x)

    def erf(self, x):
        return self._math("erf", x)

    def log1p(self, x):
        self._float_only("log1p", x)
        return self._helper("log1p", x)

    def expm1(self, x):
        self._float_only("expm1", x)
        return self._helper("expm1", x)

    def tanh(self, x):
        self._float_only("tanh", x)
        return self._helper("tanh", x)

    def sigmoid(self, x):
        self._float_only("sigmoid", x)
        return TV(f"(1.0 / (1.0 + tl.math.exp(-{x.expr})))", x.dtype)

    def atan2(self, a, b):
        self._float_only("atan2", a)
        return self._helper("atan2", a, b)

    def maximum(self, a, b):
        if a.dtype.is_bool:
            return self._binary(a, b, "|")
        if a.dtype.is_float:
            return TV(f"tl.maximum({a.expr}, {b.expr}, propagate_nan=tl.PropagateNan.ALL)",
                      a.dtype)
        return TV(f"tl.maximum({a.expr}, {b.expr})", a.dtype)

    def minimum(self, a, b):
        if a.dtype.is_bool:
            return self._binary(a, b, "&")
        if a.dtype.is_float:
            return TV(f"tl.minimum({a.expr}, {b.expr}, propagate_nan=tl.PropagateNan.ALL)",
                      a.dtype)
        return TV(f"tl.minimum({a.expr}, {b.expr})", a.dtype)

    def isnan(self, x):
        return TV(f"({x.expr} != {x.expr})", bool_)

    # --- logic and bits -----------------------------------------------------------------
    def logical_and(self, a, b):
        return TV(f"({self.to_bool(a).expr} & {self.to_bool(b).expr})", bool_)

    def logical_or(self, a, b):
        return TV(f"({self.to_bool(a).expr} | {self.to_bool(b).expr})", bool_)

    def logical_xor(self, a, b):
        return TV(f"({self.to_bool(a).expr} ^ {self.to_bool(b).expr})", bool_)

    def logical_not(self, x):
        return TV(f"({x.expr} == 0)", bool_)

    def bitwise_and(self, a, b):
        return self._binary(a, b, "&")

    def bitwise_or(self, a, b):
        return self._binary(a, b, "|")

    def bitwise_xor(self, a, b):
        return self._binary(a, b, "^")

    def bitwise_left_shift(self, a, b):
        # torch: a shift outside [0, bits) gives 0.
        inside = f"(({b.expr} >= 0) & ({b.expr} < {a.dtype.bits}))"
        return TV(f"tl.where({inside}, {a.expr} << tl.where({inside}, {b.expr}, 0), 0)",
                  a.dtype)

    def bitwise_right_shift(self, a, b):
        # torch: a shift outside [0, bits) gives the sign fill (-1 for negative a, else 0).
        inside = f"(({b.expr} >= 0) & ({b.expr} < {a.dtype.bits}))"
        fill = f"tl.where({a.expr} < 0, -1, 0)"
        return TV(f"tl.where({inside}, {a.expr} >> tl.where({inside}, {b.expr}, 0), {fill})",
                  a.dtype)

    def bitwise_not(self, x):
        if x.dtype.is_bool:
            return TV(f"({x.expr} == 0)", bool_)
        return TV(f"(~{x.expr})", x.dtype)
