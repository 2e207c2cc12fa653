"""Vectorizable f32 transcendentals, emitted as straight-line llvmlite.ir code.

Owns: exp, log, tanh, sigmoid, erf for f32 values.  Must not know: Kernels.
Spec: spec/codegen.md, "Numerics" (accuracy table; tested by
tests/codegen/test_llvm_vmath.py against numpy in f64).

Why: a call to libm's expf in a loop stops LLVM's loop vectorizer, and these
functions dominate GELU, softmax and friends.  Each function here is a range
reduction, a polynomial and selects for special values: no branches, no calls,
so LLVM vectorizes the loop around it (8 lanes on AVX2).

- exp: n = rint(x / ln2) by a magic-number addition, Cody-Waite reduction x = n*ln2 + r,
  |r| <= ln2/2, 1 + r*(1 + r*P(r)) in fused multiply-adds, P of degree 4 (a fit),
  2^n applied by vscalefps or two exponent-field scalings (results from FLT_MIN up
  to FLT_MAX are right; below FLT_MIN they are 0: Note [exp underflows to 0]).
- log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), Cephes' logf polynomial on m - 1;
  denormal inputs are rescaled by 2^23 first.
- tanh: Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1).
- sigmoid: 1 / (1 + exp(-x)).
- erf: x + x * R(x^2) for |x| < 0.9277, else 1 - exp(L(|x|)), L close to log(erfc)
  (weighted minimax fits made for refcomp; no division: Note [erf without a division]).
"""

from __future__ import annotations

import llvmlite.ir as lir

F32 = lir.FloatType()
I32 = lir.IntType(32)

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
# Note [exp's rounding by a magic number]: t = x * log2(e) + 1.5 * 2^23 rounds x / ln2 to
# the nearest integer n (|x / ln2| < 2^22), which lands in t's low mantissa bits: n is
# t - 1.5 * 2^23 as a float and bits(t) - bits(1.5 * 2^23) as an integer.  rint and a
# float -> int conversion cost three vector instructions (vrndscaleps is two) where this
# costs two, and fptosi of a NaN is poison where the bits of a NaN t are just some
# integer: the NaN in p carries through the scaling, and the final select for NaN goes.
_MAGIC = 12582912.0  # 1.5 * 2^23
_MAGIC_BITS = 0x4B400000
# exp(r) = 1 + r*(1 + r*P(r)) on |r| <= ln2/2: P of degree 4, a minimax fit of
# (e^r - 1 - r) / r^2 in exp's relative error made for refcomp (Lawson iteration; its
# error 3.1e-9 relative, 0.05 of 2^-24), one multiply-add fewer than Cephes' degree 5
# with the same measured error (max 0.88 ulp, spec/codegen.md).
_EXP_P = (0.0013814596459269524, 0.0083687175065279, 0.04166838899254799,
          0.1666652113199234, 0.4999999403953552)
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
          1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
          3.3333331174e-1)
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)
# Note [erf without a division]: erf(x) = x + x*R(x^2) for |x| < ERF_SPLIT, else
# 1 - exp(L(|x|)) with L a polynomial close to log(erfc(t)) on [ERF_SPLIT, 4] (the sign
# copied from x).  Both are weighted minimax fits made for refcomp (Lawson iteration
# against mpmath): R in erf's relative error, L in erfc(t) * |L - log erfc| (erf's
# absolute error; the weight floored at 1e-3 so that L stays close up to t = 4, where
# exp(L(4)) = 1.5e-8 makes 1 - e round to 1, as erf does from 3.92 on).  The former
# large branch, 1 - exp(-t^2) * Q(1/t), took a vdivps and three more clamps per vector
# and its small branch x * P(x^2) rounded twice (2.82 ulp); this one is 1.2 ulp
# (spec/codegen.md) with no division.
ERF_SPLIT = 0.927734375  # 475/512
_ERF_SMALL = (-0.000596411875449121, 0.004987978842109442, -0.026763107627630234,
              0.1128172054886818, -0.37612485885620117, 0.12837915122509003)
_ERF_LARGE = (-1.697437255643308e-05, 0.0003790306218434125, -0.0038634571246802807,
              0.024206621572375298, -0.10671427100896835, -0.6349020600318909,
              -1.1286852359771729, -9.171921192319132e-06)


# Inside these approximations a*b + c may become one fused multiply-add (faster, and
# the Horner steps and Cody-Waite reduction only gain accuracy from it); the error
# bounds in the tests are measured with contraction on.
_FMA = ("contract",)


def _c(v: float) -> lir.Constant:
    return lir.Constant(F32, float(v))


def _horner(b: lir.IRBuilder, x, coeffs):
    """coeffs[0] * x^(n-1) + ... + coeffs[-1]."""
    acc = _c(coeffs[0])
    for c in coeffs[1:]:
        acc = b.fadd(b.fmul(acc, x, flags=_FMA), _c(c), flags=_FMA)
    return acc


def _intrinsic(ops, name, x):
    fn = ops.m.declare_intrinsic(name, [x.type], lir.FunctionType(x.type, [x.type]))
    return ops.b.call(fn, [x])


def _pow2(b: lir.IRBuilder, n):
    """2.0**n for an i32 n in [-126, 127], built in the exponent field."""
    bits = b.shl(b.add(n, lir.Constant(I32, 127)), lir.Constant(I32, 23))
    return b.bitcast(bits, F32)


# Note [exp's 2^n]: exp's last step scales the polynomial by 2^n, n in [-126, 128].  With
# AVX-512F, LLVM lowers a vector `llvm.ldexp` to one vscalefps, which rounds once (into
# the denormals too), as the product of two exponent-field scalings does; that product
# costs 8 integer and float instructions per vector.  Without AVX-512 a vector ldexp
# becomes a libm call per lane, so the two scalings stay.  Measured on emeraldrapids, 1
# thread: sum(exp(x), -1) of [4096, 1024] 1.48 -> 1.16 ms, softmax 2.91 -> 2.49 ms.
def _has_scalef() -> bool:
    from codegen.llvm.jit import host_has_avx512

    return host_has_avx512()


# Note [exp underflows to 0]: exp(x) is a denormal for x in [-103.97, -87.34) and rounds
# to 0 below.  Computing those results makes every vector instruction that produces a
# tiny value (vscalefps, or the products of the exponent-field scalings) take a
# microcode assist: exp of -inf, -1e4 or -100 ran 10x slower than of [-10, 10] (4M f32:
# 24.4 against 2.5 ms, 1 thread), and a causal mask's -inf or a softmax's exp(x - max)
# far below the row max are common inputs.  So x is clamped to EXP_MIN (the smallest f32
# whose exp is a normal number), the arithmetic only ever sees normal numbers, and a final
# select gives 0 for x < EXP_MIN: exact results below 1.18e-38 (FLT_MIN) become 0, as
# with a flush-to-zero mode; everything at or above FLT_MIN is unchanged.
EXP_MIN = -87.33654022216797  # float32 nextafter(log(FLT_MIN), 0); exp(EXP_MIN) >= FLT_MIN


def _exp_core(b: lir.IRBuilder, ops, x, bounded: bool = False):
    """exp(x) for x in [EXP_MIN, 89] or NaN (callers clamp).

    `bounded`: 2^n by a shift (Note [exp's 2^n by a shift]): from 88.37 on, inf.
    """
    # Note [exp's rounding by a magic number]: n = rint(x / ln2) in the low bits of t;
    # with `bounded`, t carries n + 127, the biased exponent of 2^n.
    magic = _MAGIC + 127.0 if bounded else _MAGIC
    t = b.fadd(b.fmul(x, _c(_LOG2E), flags=_FMA), _c(magic), flags=_FMA)
    nf = b.fsub(t, _c(magic))
    r = b.fsub(x, b.fmul(nf, _c(_LN2_HI), flags=_FMA), flags=_FMA)
    r = b.fsub(r, b.fmul(nf, _c(_LN2_LO), flags=_FMA), flags=_FMA)
    # exp(r) = 1 + r * (1 + r * P(r)), each step one fused multiply-add
    q = b.fadd(b.fmul(_horner(b, r, _EXP_P), r, flags=_FMA), _c(1.0), flags=_FMA)
    p = b.fadd(b.fmul(q, r, flags=_FMA), _c(1.0), flags=_FMA)
    if bounded:
        # Note [exp's 2^n by a shift]
        return b.fmul(p, b.bitcast(b.shl(b.bitcast(t, I32), lir.Constant(I32, 23)), F32))
    n = b.sub(b.bitcast(t, I32), lir.Constant(I32, _MAGIC_BITS))
    if _has_scalef():
        # Note [exp's 2^n]: one vscalefps, rounded once like the product below.
        ldexp = ops.m.declare_intrinsic("llvm.ldexp", [F32, I32], lir.FunctionType(F32, [F32, I32]))
        return b.call(ldexp, [p, n])
    # 2^n as 2^(n/2) * 2^(n - n/2): each factor's exponent stays in range.
    half = b.ashr(n, lir.Constant(I32, 1))
    return b.fmul(b.fmul(p, _pow2(b, half)), _pow2(b, b.sub(n, half)), flags=_FMA)


# Note [exp's 2^n by a shift]: inside sigmoid, tanh and erf, exp's argument is clamped
# to [EXP_MIN, 89] (n in [-126, 128]) and a result over FLT_MAX may be inf (they use it
# as 1 / (1 + e) or 2 / (e + 1)).  There 2^n is built directly: t = x*log2(e) + 1.5*2^23
# + 127 holds n + 127 in its low bits, and the high bits of t (those of 1.5 * 2^23, zero
# below bit 9) shift out, so bits(t) << 23 is 2^n, a normal number for n <= 127 and inf
# for n = 128 (x >= 88.37, where exp(x) <= FLT_MAX still): two vector instructions
# (vpslld, vmulps) where the general exp's scaling takes three (the integer n, its
# conversion for vscalefps, vscalefps).  With the rounding of p * 2^n once, as before.


def exp(b: lir.IRBuilder, ops, x):
    low = b.fcmp_ordered("<", x, _c(EXP_MIN))
    clamped = b.select(low, _c(EXP_MIN), x)
    clamped = b.select(b.fcmp_ordered(">", clamped, _c(89.0)), _c(89.0), clamped)
    # A NaN x gives a NaN p (n is then any integer): NaN, with no select.
    return b.select(low, _c(0.0), _exp_core(b, ops, clamped))  # Note [exp underflows to 0]


# Note [Masked flush below the row max]: below EXP_MIN the flush select makes the result
# 0 whatever _exp_core computed, so the low clamp only keeps the arithmetic of those lanes
# on normal numbers (Note [exp underflows to 0]).  Without it, 2^n by a shift is garbage
# for n < -126, and p * 2^n may be a denormal (x - max near -265, -442, ...).  With
# AVX-512, LLVM makes the select a zero-masked vmulps, and a masked-off lane takes no
# microcode assist: measured on emeraldrapids over rows of x - max in [-265.2, -264.4],
# [-442.5, -442], [-100, -88], [-620, -600] and of -inf, -1e30: no slowdown.  So there the
# clamp (a compare and a vmaxps) goes: softmax [64, 1024] in cache 0.022 -> 0.020 ms,
# [4096, 1024] 2.49 -> 2.39 ms (kernel alone, same-process A/B).  The same bits: lanes at
# or above EXP_MIN, and NaN, compute exactly what they did.  Without AVX-512 (a plain
# multiply and a blend) the clamp stays.
def exp_nonpositive(b: lir.IRBuilder, ops, x):
    """exp(x) for x <= 0 or NaN (Note [exp below the row max] in emit.py): exp's flush to 0
    (with its low clamp only without AVX-512: Note [Masked flush below the row max]), no
    upper clamp, 2^n by a shift (n in [-126, 0])."""
    low = b.fcmp_ordered("<", x, _c(EXP_MIN))
    arg = x if _has_scalef() else b.select(low, _c(EXP_MIN), x)
    return b.select(low, _c(0.0), _exp_core(b, ops, arg, bounded=True))


def log(b: lir.IRBuilder, ops, x):
    tiny = b.fcmp_ordered("<", x, _c(1.17549435e-38))
    # 2^23: denormals become normal numbers.
    scaled = b.select(tiny, b.fmul(x, _c(8388608.0), flags=_FMA), x)
    bits = b.bitcast(scaled, I32)
    e = b.sub(b.lshr(bits, lir.Constant(I32, 23)), lir.Constant(I32, 126))
    e = b.sub(e, b.select(tiny, lir.Constant(I32, 23), lir.Constant(I32, 0)))
    mant_bits = b.or_(b.and_(bits, lir.Constant(I32, 0x807FFFFF)), lir.Constant(I32, 0x3F000000))
    m = b.bitcast(mant_bits, F32)  # in [0.5, 1)
    small = b.fcmp_ordered("<", m, _c(0.707106781186547524))
    ef = b.sitofp(b.sub(e, b.zext(small, I32)), F32)
    f = b.fsub(b.select(small, b.fadd(m, m, flags=_FMA), m), _c(1.0), flags=_FMA)
    z = b.fmul(f, f, flags=_FMA)
    y = b.fmul(b.fmul(_horner(b, f, _LOG_P), f), z, flags=_FMA)
    y = b.fadd(y, b.fmul(ef, _c(_LN2_LO), flags=_FMA), flags=_FMA)
    y = b.fsub(y, b.fmul(z, _c(0.5), flags=_FMA), flags=_FMA)
    result = b.fadd(b.fadd(f, y), b.fmul(ef, _c(_LN2_HI), flags=_FMA), flags=_FMA)
    # Special values: log(+inf) = inf, log(0) = -inf, log(<0) = NaN, NaN stays NaN.
    result = b.select(b.fcmp_ordered("==", x, _c(float("inf"))), x, result)
    result = b.select(b.fcmp_ordered("==", x, _c(0.0)), _c(float("-inf")), result)
    return b.select(b.fcmp_unordered("<", x, _c(0.0)), _c(float("nan")), result)


def tanh(b: lir.IRBuilder, ops, x):
    ax = _intrinsic(ops, "llvm.fabs", x)
    z = b.fmul(x, x, flags=_FMA)
    small = b.fadd(b.fmul(b.fmul(_horner(b, z, _TANH_P), z), x, flags=_FMA), x)
    # Note [Range-limited exp]: the large branch is used for |x| >= 0.625, and tanh(|x|)
    # rounds to 1 from 9.01 on: exp's argument 2 min(|x|, 10) lies in [0, 20]; NaN stays.
    two_ax = b.fmul(b.select(b.fcmp_ordered(">", ax, _c(10.0)), _c(10.0), ax), _c(2.0))
    e = _exp_core(b, ops, two_ax, bounded=True)
    large = b.fsub(_c(1.0), b.fdiv(_c(2.0), b.fadd(e, _c(1.0), flags=_FMA)))
    large = _intrinsic_copysign(ops, large, x)
    return b.select(b.fcmp_ordered("<", ax, _c(0.625)), small, large)


def _intrinsic_copysign(ops, mag, sign):
    fn = ops.m.declare_intrinsic("llvm.copysign", [mag.type],
                                 lir.FunctionType(mag.type, [mag.type, mag.type]))
    return ops.b.call(fn, [mag, sign])


# Note [Range-limited exp]: exp's clamps (a compare and two selects), its flush select
# and the general 2^n cost 5 of its ~17 vector instructions.  Where the argument's range
# is known (tanh: [0, 20] after its own clamp; erf: [-16, 0]) or the result only feeds
# 1 / (1 + e) (sigmoid), the inner exp is `_exp_core` with only the clamps it needs,
# no flush select, and 2^n by a shift (Note [exp's 2^n by a shift]).  The same
# reduction and polynomial, so the same accuracy (the table in spec/codegen.md).
def sigmoid(b: lir.IRBuilder, ops, x):
    # Note [Range-limited exp]: -x clamped to [EXP_MIN, 89]: below, e is exp(EXP_MIN) =
    # FLT_MIN where exp flushes to 0, and 1 + e rounds to 1 either way; from 88.37 on, e is
    # inf where the exact 1 / (1 + e) is below 3.7e-39 (a subnormal): 0, as exp flushes.
    nx = b.fneg(x)
    nx = b.select(b.fcmp_ordered("<", nx, _c(EXP_MIN)), _c(EXP_MIN), nx)
    nx = b.select(b.fcmp_ordered(">", nx, _c(89.0)), _c(89.0), nx)
    e = _exp_core(b, ops, nx, bounded=True)
    return b.fdiv(_c(1.0), b.fadd(_c(1.0), e, flags=_FMA))


def erf(b: lir.IRBuilder, ops, x):
    # Note [erf without a division]
    ax = _intrinsic(ops, "llvm.fabs", x)
    z = b.fmul(x, x, flags=_FMA)
    small = b.fadd(b.fmul(x, _horner(b, z, _ERF_SMALL), flags=_FMA), x, flags=_FMA)
    t = b.select(b.fcmp_ordered(">", ax, _c(4.0)), _c(4.0), ax)
    # Note [Range-limited exp]: L(t) lies in [-18, 0] for t in [0, 4] (or is NaN)
    e = _exp_core(b, ops, _horner(b, t, _ERF_LARGE), bounded=True)
    large = _intrinsic_copysign(ops, b.fsub(_c(1.0), e, flags=_FMA), x)
    result = b.select(b.fcmp_ordered("<", ax, _c(ERF_SPLIT)), small, large)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)
