"""ScalarOps for LLVM: the scalar vocabulary as llvmlite.ir instructions.

Owns: `LLVMScalarOps` (one method per name in SCALAR_VOCABULARY, on typed values
`TV(value, dtype)`), `llvm_type` (compute and storage types).  Must not know:
Kernels, graphs.  Spec: spec/codegen.md, "LLVM" and "Numerics".

Semantics follow `ir.scalar.NumpyScalarOps`: maximum/minimum propagate NaN;
integer division and remainder by zero give 0 (numpy's answer) instead of
LLVM's undefined behaviour; floor division and remainder round toward -inf like
Python.  exp, log, tanh, sigmoid and erf on f32 are straight-line polynomials
(codegen/llvm/vmath.py) so loops using them still vectorize; on f64 and for the
other transcendentals they call libm (accurate, but scalar).
"""

from __future__ import annotations

from typing import NamedTuple

import llvmlite.ir as lir

from codegen.llvm import vmath
from codegen.scalar import compute_dtype
from ir.types import DType, bf16, bool_, f16, f32, f64

I1, I8, I16, I32, I64 = (lir.IntType(n) for n in (1, 8, 16, 32, 64))
F32, F64, F16 = lir.FloatType(), lir.DoubleType(), lir.HalfType()


class TV(NamedTuple):
    """A typed LLVM value: the IR value and its (compute) dtype."""

    value: lir.Value
    dtype: DType


def llvm_type(dtype: DType, storage: bool = False) -> lir.Type:
    """The LLVM type values of `dtype` are computed in (or stored as, if `storage`)."""
    if storage:
        if dtype.short == "bf16":
            return I16
        if dtype.short == "f16":
            return F16
        if dtype.is_bool:
            return I8
    else:
        dtype = compute_dtype(dtype)
    if dtype.is_bool:
        return I1
    if dtype == f32:
        return F32
    if dtype == f64:
        return F64
    return lir.IntType(dtype.bits)


_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class LLVMScalarOps:
    """The vocabulary on an IRBuilder.  Unsupported (dtype, op) pairs raise NotImplementedError."""

    def __init__(self, builder: lir.IRBuilder, module: lir.Module):
        self.b = builder
        self.m = module
        # vector-math functions emitted so far (Note [Interleaved vector math] in emit.py)
        self.vector_math = 0

    # --- helpers -------------------------------------------------------------------------
    def _libm(self, name: str, ty: lir.Type, n_args: int = 1):
        symbol = name + ("f" if ty == F32 else "")
        fn = self.m.globals.get(symbol)
        if fn is None:
            fn = lir.Function(self.m, lir.FunctionType(ty, [ty] * n_args), symbol)
        return fn

    def _float_call(self, name, x: TV, *more: TV, intrinsic=False) -> TV:
        ty = x.value.type
        n_args = 1 + len(more)
        fn = self.m.declare_intrinsic(f"llvm.{name}", [ty], lir.FunctionType(ty, [ty] * n_args)) \
            if intrinsic else self._libm(name, ty, n_args)
        return TV(self.b.call(fn, [x.value] + [m.value for m in more]), x.dtype)

    def _c(self, value, dtype: DType) -> lir.Constant:
        ty = llvm_type(dtype)
        if dtype.is_float:
            return lir.Constant(ty, float(value))
        return lir.Constant(ty, int(bool(value)) if dtype.is_bool else int(value))

    def _signed(self, dtype: DType) -> bool:
        return dtype.kind == "int"

    # --- the vocabulary ------------------------------------------------------------------
    def const(self, value, like: TV) -> TV:
        return TV(self._c(value, like.dtype), like.dtype)

    def cast(self, x: TV, dtype: DType) -> TV:
        b, src, dst = self.b, x.dtype, compute_dtype(dtype)
        if dtype in (f16, bf16):
            return TV(round_half(b, self.cast(x, f32).value, dtype), f32)
        if src == dst:
            return x
        ty = llvm_type(dst)
        v = x.value
        if dst.is_bool:
            if src.is_float:
                return TV(b.fcmp_unordered("!=", v, lir.Constant(v.type, 0.0)), bool_)
            return TV(b.icmp_unsigned("!=", v, lir.Constant(v.type, 0)), bool_)
        if src.is_bool:
            return TV(b.uitofp(v, ty) if dst.is_float else b.zext(v, ty), dst)
        if src.is_float and dst.is_float:
            return TV(b.fpext(v, ty) if dst.bits > src.bits else b.fptrunc(v, ty), dst)
        if src.is_float:
            return TV(self._float_to_int(v, src, dst), dst)
        if dst.is_float:
            return TV(b.sitofp(v, ty) if self._signed(src) else b.uitofp(v, ty), dst)
        if dst.bits > src.bits:
            return TV(b.sext(v, ty) if self._signed(src) else b.zext(v, ty), dst)
        if dst.bits < src.bits:
            return TV(b.trunc(v, ty), dst)
        return TV(v, dst)

    def _float_to_int(self, v, src: DType, dst: DType):
        """Note [Float to int as eager's CPU kernel]: C++'s `static_cast<int>(float)`
        compiles to x86's truncating conversion to int64 (for an int64 or unsigned result)
        or int32 (for every other), whose value for NaN and out-of-range inputs is that
        type's minimum; a narrower result keeps the low bits (`300.0` -> int8 44, `-2.5`
        -> uint8 254, NaN -> int32 -2147483648, NaN -> int8 0), as torch's CPU casts
        give.  LLVM's plain `fptosi` is poison there, so the in-range test picks the
        minimum instead (spec/ops.md, `cast`)."""
        b = self.b
        wide = I64 if dst.bits == 64 or not self._signed(dst) else I32
        bits = wide.width
        fn = self.m.declare_intrinsic("llvm.fptosi.sat", [wide, v.type],
                                      lir.FunctionType(wide, [v.type]))
        # trunc(v) in [-2^(bits-1), 2^(bits-1)): v > -2^(bits-1) - 1 where that is
        # representable (f64 for 32 bits), else v >= -2^(bits-1) (nothing lies between)
        low = -(2.0 ** (bits - 1))
        above = (b.fcmp_ordered(">", v, lir.Constant(v.type, low - 1.0))
                 if src.bits == 64 and bits == 32
                 else b.fcmp_ordered(">=", v, lir.Constant(v.type, low)))
        below = b.fcmp_ordered("<", v, lir.Constant(v.type, -low))
        ok = b.and_(above, below)
        r = b.select(ok, b.call(fn, [v]), lir.Constant(wide, -(2 ** (bits - 1))))
        ty = llvm_type(dst)
        return b.trunc(r, ty) if ty.width < bits else r

    def to_bool(self, x: TV) -> TV:
        return self.cast(x, bool_)

    def add(self, a, b):
        if a.dtype.is_bool:
            return TV(self.b.or_(a.value, b.value), a.dtype)
        op = self.b.fadd if a.dtype.is_float else self.b.add
        return TV(op(a.value, b.value), a.dtype)

    def sub(self, a, b):
        op = self.b.fsub if a.dtype.is_float else self.b.sub
        return TV(op(a.value, b.value), a.dtype)

    def mul(self, a, b):
        if a.dtype.is_bool:
            return TV(self.b.and_(a.value, b.value), a.dtype)
        op = self.b.fmul if a.dtype.is_float else self.b.mul
        return TV(op(a.value, b.value), a.dtype)

    def truediv(self, a, b):
        if not a.dtype.is_float:
            raise NotImplementedError("truediv on integers (operands are cast to float first)")
        return TV(self.b.fdiv(a.value, b.value), a.dtype)

    def _safe_int_div(self, a, b, op):
        """The divisor to hand the machine: 1 where b == 0 (the result is then replaced
        by 0, as numpy does; eager raises, checked before the kernel runs) and, for signed
        types, where b == -1: x86's idiv traps on INT_MIN / -1, which killed the process
        with SIGFPE; the callers give -a (wrapping, as torch does) there.  Returns
        (b == 0, divisor, 0, b == -1 or None)."""
        ty = a.value.type
        zero = lir.Constant(ty, 0)
        is_zero = self.b.icmp_unsigned("==", b.value, zero)
        divisor = self.b.select(is_zero, lir.Constant(ty, 1), b.value)
        minus_one = None
        if self._signed(a.dtype):
            minus_one = self.b.icmp_signed("==", b.value, lir.Constant(ty, -1))
            divisor = self.b.select(minus_one, lir.Constant(ty, 1), divisor)
        return is_zero, divisor, zero, minus_one

    def floordiv(self, a, b):
        bl = self.b
        if a.dtype.is_float:
            return self._float_floordiv(a, b)
        is_zero, d, zero, minus_one = self._safe_int_div(a, b, "div")
        if not self._signed(a.dtype):
            return TV(bl.select(is_zero, zero, bl.udiv(a.value, d)), a.dtype)
        q = bl.sdiv(a.value, d)
        r = bl.srem(a.value, d)
        # Python floors: step down when the remainder is nonzero and signs differ.
        adjust = bl.and_(bl.icmp_signed("!=", r, zero),
                         bl.icmp_signed("!=", bl.icmp_signed("<", r, zero),
                                        bl.icmp_signed("<", d, zero)))
        q = bl.sub(q, bl.zext(adjust, a.value.type))
        q = bl.select(minus_one, bl.neg(a.value), q)  # a // -1 == -a, INT_MIN wraps
        return TV(bl.select(is_zero, zero, q), a.dtype)

    def _float_floordiv(self, a, b):
        """ATen's div_floor_floating (c10/util/generic_math.h), step for step: floor(a / b)
        differs at the edges (inf // 0.5 is NaN in torch and Python, a / b rounding up to
        an integer).  The comparisons are C's: `!=` is true for NaN (unordered)."""
        bl, ty, dt = self.b, a.value.type, a.dtype
        zero, one, half = lir.Constant(ty, 0.0), lir.Constant(ty, 1.0), lir.Constant(ty, 0.5)
        quotient = bl.fdiv(a.value, b.value)
        mod = bl.frem(a.value, b.value)
        div = bl.fdiv(bl.fsub(a.value, mod), b.value)
        step = bl.and_(bl.fcmp_unordered("!=", mod, zero),
                       bl.xor(bl.fcmp_ordered("<", b.value, zero),
                              bl.fcmp_ordered("<", mod, zero)))
        div = bl.select(step, bl.fsub(div, one), div)
        floored = self.floor(TV(div, dt)).value
        floored = bl.select(bl.fcmp_ordered(">", bl.fsub(div, floored), half),
                            bl.fadd(floored, one), floored)
        signed_zero = self._float_call("copysign", TV(zero, dt), TV(quotient, dt),
                                       intrinsic=True).value
        out = bl.select(bl.fcmp_unordered("!=", div, zero), floored, signed_zero)
        return TV(bl.select(bl.fcmp_ordered("==", b.value, zero), quotient, out), dt)

    def remainder(self, a, b):
        bl = self.b
        r = self.fmod(a, b)
        if not a.dtype.is_float and not self._signed(a.dtype):
            return r
        zero = lir.Constant(a.value.type, 0.0 if a.dtype.is_float else 0)
        if a.dtype.is_float:
            nonzero = bl.fcmp_ordered("!=", r.value, zero)
            differ = bl.icmp_unsigned("!=", bl.fcmp_ordered("<", r.value, zero),
                                      bl.fcmp_ordered("<", b.value, zero))
            fixed = bl.fadd(r.value, b.value)
        else:
            nonzero = bl.icmp_signed("!=", r.value, zero)
            differ = bl.icmp_unsigned("!=", bl.icmp_signed("<", r.value, zero),
                                      bl.icmp_signed("<", b.value, zero))
            fixed = bl.add(r.value, b.value)
        return TV(bl.select(bl.and_(nonzero, differ), fixed, r.value), a.dtype)

    def fmod(self, a, b):
        bl = self.b
        if a.dtype.is_float:
            return TV(bl.frem(a.value, b.value), a.dtype)
        is_zero, d, zero, _ = self._safe_int_div(a, b, "rem")  # a % -1 == a % 1 == 0
        r = bl.srem(a.value, d) if self._signed(a.dtype) else bl.urem(a.value, d)
        return TV(bl.select(is_zero, zero, r), a.dtype)

    def pow(self, a, b):
        if not a.dtype.is_float:
            raise NotImplementedError("pow on integers")
        return self._float_call("pow", a, b, intrinsic=True)

    def neg(self, x):
        if x.dtype.is_float:
            return TV(self.b.fneg(x.value), x.dtype)
        return TV(self.b.neg(x.value), x.dtype)

    def abs(self, x):
        if x.dtype.is_float:
            return self._float_call("fabs", x, intrinsic=True)
        if not self._signed(x.dtype):
            return x
        zero = lir.Constant(x.value.type, 0)
        neg = self.b.icmp_signed("<", x.value, zero)
        return TV(self.b.select(neg, self.b.neg(x.value), x.value), x.dtype)

    def sign(self, x):
        bl, ty = self.b, x.value.type
        if x.dtype.is_float:
            # torch.sign: 1, -1, and +0.0 for zeros of either sign and for NaN.
            zero, one = lir.Constant(ty, 0.0), lir.Constant(ty, 1.0)
            neg = bl.select(bl.fcmp_ordered("<", x.value, zero), lir.Constant(ty, -1.0), zero)
            return TV(bl.select(bl.fcmp_ordered(">", x.value, zero), one, neg), x.dtype)
        zero = lir.Constant(ty, 0)
        if not self._signed(x.dtype):  # u8 (128..255 are not negative) and bool
            return TV(bl.zext(bl.icmp_unsigned("!=", x.value, zero), ty), x.dtype)
        pos = bl.zext(bl.icmp_signed(">", x.value, zero), ty)
        neg = bl.zext(bl.icmp_signed("<", x.value, zero), ty)
        return TV(bl.sub(pos, neg), x.dtype)

    def _rounding(self, name, x):
        return self._float_call(name, x, intrinsic=True) if x.dtype.is_float else x

    def floor(self, x):
        return self._rounding("floor", x)

    def ceil(self, x):
        return self._rounding("ceil", x)

    def round(self, x):
        return self._rounding("roundeven", x)

    def trunc(self, x):
        return self._rounding("trunc", x)

    def _vector_or_libm(self, name, x):
        if x.dtype == f32:
            self.vector_math += 1
            return TV(getattr(vmath, name)(self.b, self, x.value), x.dtype)
        return self._float_call(name, x)

    def exp(self, x):
        return self._vector_or_libm("exp", x)

    def log(self, x):
        return self._vector_or_libm("log", x)

    def tanh(self, x):
        return self._vector_or_libm("tanh", x)

    def erf(self, x):
        return self._vector_or_libm("erf", x)

    def sigmoid(self, x):
        if x.dtype == f32:
            self.vector_math += 1
            return TV(vmath.sigmoid(self.b, self, x.value), x.dtype)
        one = self.const(1.0, x)
        return self.truediv(one, self.add(one, self.exp(self.neg(x))))

    def log1p(self, x):
        return self._float_call("log1p", x)

    def expm1(self, x):
        return self._float_call("expm1", x)

    def sqrt(self, x):
        return self._float_call("sqrt", x, intrinsic=True)

    def rsqrt(self, x):
        return self.truediv(self.const(1.0, x), self.sqrt(x))

    def sin(self, x):
        return self._float_call("sin", x, intrinsic=True)

    def cos(self, x):
        return self._float_call("cos", x, intrinsic=True)

    def atan2(self, a, b):
        return self._float_call("atan2", a, b)

    def _pick(self, a, b, greater: bool):
        bl = self.b
        if a.dtype.is_bool:
            op = bl.or_ if greater else bl.and_
            return TV(op(a.value, b.value), a.dtype)
        if a.dtype.is_float:
            better = bl.fcmp_ordered(">" if greater else "<", a.value, b.value)
            a_nan = bl.fcmp_unordered("uno", a.value, a.value)
            # b NaN: the comparison is false and b (NaN) is picked; a NaN: a is picked.
            return TV(bl.select(bl.or_(better, a_nan), a.value, b.value), a.dtype)
        cmp = bl.icmp_signed if self._signed(a.dtype) else bl.icmp_unsigned
        better = cmp(">" if greater else "<", a.value, b.value)
        return TV(bl.select(better, a.value, b.value), a.dtype)

    def maximum(self, a, b):
        return self._pick(a, b, True)

    def minimum(self, a, b):
        return self._pick(a, b, False)

    def compare(self, name, a, b):
        bl, op = self.b, _FCMP[name]
        if a.dtype.is_float:
            cmp = bl.fcmp_unordered if name == "ne" else bl.fcmp_ordered
        else:
            cmp = bl.icmp_signed if self._signed(a.dtype) else bl.icmp_unsigned
        return TV(cmp(op, a.value, b.value), bool_)

    def where(self, c, a, b):
        return TV(self.b.select(c.value, a.value, b.value), a.dtype)

    def isnan(self, x):
        if not x.dtype.is_float:
            return TV(lir.Constant(I1, 0), bool_)
        return TV(self.b.fcmp_unordered("uno", x.value, x.value), bool_)

    def logical_and(self, a, b):
        return TV(self.b.and_(self.to_bool(a).value, self.to_bool(b).value), bool_)

    def logical_or(self, a, b):
        return TV(self.b.or_(self.to_bool(a).value, self.to_bool(b).value), bool_)

    def logical_xor(self, a, b):
        return TV(self.b.xor(self.to_bool(a).value, self.to_bool(b).value), bool_)

    def logical_not(self, x):
        return TV(self.b.not_(self.to_bool(x).value), bool_)

    def bitwise_and(self, a, b):
        return TV(self.b.and_(a.value, b.value), a.dtype)

    def bitwise_or(self, a, b):
        return TV(self.b.or_(a.value, b.value), a.dtype)

    def bitwise_xor(self, a, b):
        return TV(self.b.xor(a.value, b.value), a.dtype)

    def bitwise_not(self, x):
        return TV(self.b.not_(x.value), x.dtype)

    def _shift_amount(self, a, s):
        """(s inside [0, bits), s or 0): LLVM's shifts are poison outside that range;
        one unsigned compare also catches a negative s."""
        ty = a.value.type
        inside = self.b.icmp_unsigned("<", s.value, lir.Constant(ty, ty.width))
        return inside, self.b.select(inside, s.value, lir.Constant(ty, 0))

    def bitwise_left_shift(self, a, s):
        inside, amount = self._shift_amount(a, s)
        shifted = self.b.shl(a.value, amount)
        return TV(self.b.select(inside, shifted, lir.Constant(a.value.type, 0)), a.dtype)

    def bitwise_right_shift(self, a, s):
        bl, ty = self.b, a.value.type
        inside, amount = self._shift_amount(a, s)
        if self._signed(a.dtype):  # outside: the sign fill, -1 for a negative a, else 0
            shifted = bl.ashr(a.value, amount)
            fill = bl.ashr(a.value, lir.Constant(ty, ty.width - 1))
        else:
            shifted, fill = bl.lshr(a.value, amount), lir.Constant(ty, 0)
        return TV(bl.select(inside, shifted, fill), a.dtype)


def round_half(b: lir.IRBuilder, v, dtype: DType):
    """The f32 `v` rounded to f16 or bf16 and widened back to f32 (Note [Half casts])."""
    if dtype == f16:
        return b.fpext(b.fptrunc(v, F16), F32)
    return b.bitcast(b.shl(b.zext(to_bf16(b, v), I32), lir.Constant(I32, 16)), F32)


def to_bf16(b: lir.IRBuilder, v):
    """Round an f32 to bf16 bits, nearest even; NaN stays a (quiet) NaN."""
    bits = b.bitcast(v, I32)
    lsb = b.and_(b.lshr(bits, lir.Constant(I32, 16)), lir.Constant(I32, 1))
    rounded = b.lshr(b.add(b.add(bits, lir.Constant(I32, 0x7FFF)), lsb), lir.Constant(I32, 16))
    is_nan = b.fcmp_unordered("uno", v, v)
    out = b.select(is_nan, lir.Constant(I32, 0x7FC0), rounded)
    return b.trunc(out, I16)
