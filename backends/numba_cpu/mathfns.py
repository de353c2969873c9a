"""Vectorizable scalar transcendentals for the numba CPU backend, in float32 and float64.

Owns: exp, exp2, log, log1p, expm1, tanh, logistic, erf, erfc as numba scalar functions
(`exp_f32`, `exp_f64`, ...), the `FUNCS` table the code generator reads, and `func_name`.
Imports only numpy, numba and llvmlite (never fnad's tracing machinery).

Why it exists: the pip llvmlite has no SVML, so `np.exp` / `np.log` / `np.tanh` inside an
njit loop are scalar libm calls that stop LLVM's loop vectorizer (1M f32 exp: 2.1 ms against
NumPy's 0.38 ms). Written as range reduction + polynomial + bit tricks, the same functions
inline into the caller's loop and vectorize (`<16 x float>` on AVX-512).

How the code generator uses them
--------------------------------
Emit an import in the generated module and call the scalar function inside the loop nest::

    from fnad.backends.numba_cpu.mathfns import exp_f32, logistic_f32   # scalar_ops.func_name
    for i in range(n):
        out[i] = logistic_f32(a[i] * np.float32(2.0))

- Pick by dtype: `FUNCS["exp"][np.float32]` is the function,
  `scalar_ops.func_name("exp", np.float32)` its importable name ("exp_f32").
  float16/bfloat16: compute in float32 and cast back.
- Give each function an argument of its own dtype: nothing checks it (an f32 function given
  a float64 computes in float64 with float32 constants, to float32 accuracy).
- Each function is `@njit(forceinline=True, fastmath={'contract'}, error_model='numpy',
  cache=True, no_cfunc_wrapper=True)`, deliberately not numba's `inline='always'`:
  forceinline marks the compiled function `alwaysinline` for LLVM, so it is inlined into
  the caller's loop (and vectorized there) whatever its size, and its instructions keep
  this module's flags (`contract` only: FMA contraction). Numba-IR inlining
  (`inline='always'`) gives the inlined code the *caller's* flags, and `reassoc` lets LLVM
  fold the compensated steps these functions rely on; measured in a caller with the flag
  set below: log1p_f32(1e-5) off by 15,000 ulp ((u - 1) - x folded to 0) and exp_f32(88.5)
  = inf (2^64 * 2^64 regrouped into 2^128).
- Callers: `fastmath={'arcp','contract','afn','reassoc','nsz'}` and `error_model='numpy'`
  (a checked division blocks vectorization). Avoid `nnan`/`ninf` (`fastmath=True`): these
  functions keep their own flags, but the caller's code around them would drop NaN/inf.
- Cost: inlined math makes a kernel's LLVM optimization longer (~20 ms per function used);
  the helpers themselves compile once per machine (`cache=True`: a new process loads them
  from `__pycache__` in milliseconds; about 1.5 s the very first time).

Accuracy: max error in ulps found by tests/test_numba_math.py (3M points per function and
dtype: dense grids, log-uniform magnitudes, random bit patterns; float64 reference for f32,
long double for f64), and the bound the tests assert:

    function     f32 found / asserted   f64 found / asserted   f64 implementation
    exp          1.02 / 2               0.96 / 2               polynomial (vectorizes)
    exp2         1.05 / 2               1.01 / 2               polynomial
    log          0.78 / 2               0.82 / 2               polynomial
    log1p        0.82 / 2               0.80 / 2               polynomial
    expm1        1.53 / 3               1.65 / 3               polynomial
    tanh         2.50 / 3               2.50 / 3               polynomial (through expm1)
    logistic     2.09 / 3               1.86 / 3               polynomial (through exp)
    erf          0.96 / 3               libm                   `math.erf`: scalar, no SIMD
    erfc         0.60 / 1  (in f64)     libm                   `math.erfc`: scalar, no SIMD

Relative error is used everywhere, also near 0 for tanh and erf (they are evaluated so
that it stays small there; no absolute-error exception is needed). The libm entries are
tested bit-identical to Python's `math.erf`/`math.erfc`. erfc in f32 computes in float64
(polynomials and an exp fitted to float32's needs, vectorized 8 lanes wide) and rounds once:
0.60 ulp at most over every float32 in [-10.2, 10.2] (it was libm's erfc, a scalar call: 1M
f32 15.9 -> 2.2 ms; float64-accurate pieces at first, the degrees fitted to float32's needs
now: 0.6 of that time; exact GELU is `x/2 erfc(-x/√2)`).

Special values follow NumPy: NaN propagates; exp(+inf)=inf, exp(-inf)=0, overflow gives inf
and underflow 0 (through the subnormals); log(0)=-inf, log(x<0)=NaN, log1p(-1)=-inf;
expm1(-inf)=-1; tanh(+-inf)=+-1; logistic(+-inf)=1/0; erf(+-inf)=+-1; and -0 stays -0 where
the function is odd at 0 (expm1, log1p, tanh, erf).

Polynomial coefficients were fitted for this module: Chebyshev fits (mpmath.chebyfit at
60 digits, a development-time tool, not a dependency) of the stated function on the stated
interval, rounded to the target precision, then checked on a dense grid; each table says
its function, interval and degree. The algorithms follow the classic designs (Cody-Waite
reduction as in Cephes; fdlibm's log kernel; Kahan-style compensation), the code is ours.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from fnad.backends.numba_cpu.scalar_ops import MATHFNS

_njit = numba.njit(fastmath={"contract"}, error_model="numpy", forceinline=True, cache=True,
                  no_cfunc_wrapper=True)            # no C wrapper: kernels.NJIT_OPTIONS

# ---- bit-level helpers (LLVM intrinsics: they inline and vectorize) --------------------------

def _layout(ty):
    """(LLVM float type, same-width int type, mantissa bits, exponent bias) of a numba float."""
    if ty == types.float32:
        return ir.FloatType(), ir.IntType(32), 23, 127
    return ir.DoubleType(), ir.IntType(64), 52, 1023


@intrinsic
def _pow2(typingctx, n):
    """2**n for an integral float n in the normal exponent range (f32: [-126, 127]): built
    from bits as (n + bias) << mantissa_bits."""
    if n not in (types.float32, types.float64):
        return None

    def codegen(context, builder, sig, args):
        fty, ity, mant, bias = _layout(sig.args[0])
        k = builder.fptosi(args[0], ity)
        bits = builder.shl(builder.add(k, ir.Constant(ity, bias)), ir.Constant(ity, mant))
        return builder.bitcast(bits, fty)
    return n(n), codegen


@intrinsic
def _split_exponent(typingctx, x):
    """(m, e) with x = m * 2**e and m in [sqrt(1/2), sqrt(2)), for positive normal finite x.

    Adding (bits(1) - bits(sqrt(1/2))) to the bits before reading the exponent moves the
    mantissa boundary from 1 to sqrt(1/2), so |m - 1| <= 0.4142 (the fdlibm/musl trick)."""
    if x not in (types.float32, types.float64):
        return None

    def codegen(context, builder, sig, args):
        fty, ity, mant, bias = _layout(sig.args[0])
        one, sqrt_half = ((0x3F800000, 0x3F3504F3) if mant == 23
                          else (0x3FF0000000000000, 0x3FE6A09E667F3BCD))
        i = builder.add(builder.bitcast(args[0], ity), ir.Constant(ity, one - sqrt_half))
        e = builder.sub(builder.lshr(i, ir.Constant(ity, mant)), ir.Constant(ity, bias))
        mbits = builder.add(builder.and_(i, ir.Constant(ity, (1 << mant) - 1)),
                            ir.Constant(ity, sqrt_half))
        parts = [builder.bitcast(mbits, fty), builder.sitofp(e, fty)]
        return context.make_tuple(builder, sig.return_type, parts)
    return types.UniTuple(x, 2)(x), codegen


# ---- constants ---------------------------------------------------------------------------------
f32, f64 = np.float32, np.float64
_NAN32, _INF32 = f32(np.nan), f32(np.inf)
_NAN64, _INF64 = f64(np.nan), f64(np.inf)
_ONE32, _TWO32, _HALF32 = f32(1.0), f32(2.0), f32(0.5)
_ONE64, _TWO64, _HALF64 = f64(1.0), f64(2.0), f64(0.5)
_LOG2E32, _LOG2E64 = f32(1.4426950408889634), f64(1.4426950408889634)
_LN2_32, _LN2_64 = f32(0.6931471805599453), f64(0.6931471805599453)
# ln2 = HI + LO with HI's low bits zero, so n*HI is exact for every n the reductions produce
# (f32: 16-bit HI times |n| <= 150; f64: 32-bit HI times |n| <= 1077): Cody-Waite reduction.
_LN2_HI32, _LN2_LO32 = f32(0.693145751953125), f32(1.4286068203094172e-06)
_LN2_HI64, _LN2_LO64 = f64(6.93147180369123816490e-01), f64(1.90821492927058770002e-10)

# ---- expm1 on the reduced interval: e^r - 1 = r + r^2 P(r), |r| <= ln2/2 ---------------------
# P fits (e^r - 1 - r) / r^2 on [-ln2/2, ln2/2]; degree 4 (f32, fit error 6.5e-8 relative,
# weight r^2 <= 0.12) and 10 (f64, 1.4e-18).
_PE32 = (f32(0.5), f32(0.16666577756404877), f32(0.041666556149721146),
         f32(0.008363173343241215), f32(0.0013926175888627768))
_PE64 = (0.5, 0.1666666666666667, 0.04166666666666667, 0.008333333333326141,
         0.0013888888888883752, 0.00019841269874800694, 2.480158732553351e-05,
         2.755725542549107e-06, 2.755727366116628e-07, 2.5105206480259365e-08,
         2.0914679452495193e-09)


@_njit
def _expm1_poly_f32(r):
    c0, c1, c2, c3, c4 = _PE32
    p = c4
    p = p * r + c3
    p = p * r + c2
    p = p * r + c1
    p = p * r + c0
    return r + r * r * p


@_njit
def _expm1_poly_f64(r):
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = _PE64
    p = c10
    p = p * r + c9
    p = p * r + c8
    p = p * r + c7
    p = p * r + c6
    p = p * r + c5
    p = p * r + c4
    p = p * r + c3
    p = p * r + c2
    p = p * r + c1
    p = p * r + c0
    return r + r * r * p


@_njit
def _scale_f32(y, n):
    """y * 2**n for n in [-151, 129]: two factors, so 2**128 and subnormal results work."""
    n1 = np.floor(n * _HALF32)
    return y * _pow2(n1) * _pow2(n - n1)


@_njit
def _scale_f64(y, n):
    n1 = np.floor(n * _HALF64)
    return y * _pow2(n1) * _pow2(n - n1)


# ---- exp ---------------------------------------------------------------------------------------
# exp(x) = 2^n * e^r with n = round(x / ln2), r = x - n ln2 (Cody-Waite, |r| <= ln2/2),
# e^r = 1 + expm1_poly(r). x is clamped above to where the result is already inf (f32: 89,
# f64: 710); 2^n is applied as two factors for subnormal results. At or below the point
# where the result rounds to 0 (f32: -104, f64: -746) the result is selected as 0 and
# computed from x = 0 meanwhile: computing it (through a product that underflows) costs a
# microcode assist per vector on Intel CPUs (a causal-attention softmax, half its inputs
# masked to -1e9: 2.3 ms against 0.7 ms for [8, 8, 128, 128] on Sapphire Rapids).
@_njit
def exp_f32(x):
    zero = not x > f32(-104.0)                   # also NaN: returned as itself below
    xc = x if x < f32(89.0) else f32(89.0)
    xc = f32(0.0) if zero else xc
    n = np.floor(xc * _LOG2E32 + _HALF32)
    r = (xc - n * _LN2_HI32) - n * _LN2_LO32
    y = _scale_f32(_ONE32 + _expm1_poly_f32(r), n)
    y = f32(0.0) if zero else y
    return x if x != x else y


@_njit
def exp_f64(x):
    zero = not x > -746.0
    xc = x if x < 710.0 else 710.0
    xc = 0.0 if zero else xc
    n = np.floor(xc * _LOG2E64 + _HALF64)
    r = (xc - n * _LN2_HI64) - n * _LN2_LO64
    y = _scale_f64(_ONE64 + _expm1_poly_f64(r), n)
    y = 0.0 if zero else y
    return x if x != x else y


@_njit
def _exp_core_f32(x):
    """e^x for x in [-87, 88] (one 2^n factor), no special values: for erf's exp(-x^2)."""
    n = np.floor(x * _LOG2E32 + _HALF32)
    r = (x - n * _LN2_HI32) - n * _LN2_LO32
    return (_ONE32 + _expm1_poly_f32(r)) * _pow2(n)


# ---- exp2 --------------------------------------------------------------------------------------
# 2^x = 2^n * e^(f ln2), n = round(x), f = x - n exact, |f ln2| <= ln2/2. Clamped above
# and selected as 0 below (f32: -151, f64: -1076) as exp is.
@_njit
def exp2_f32(x):
    zero = not x > f32(-151.0)
    xc = x if x < f32(129.0) else f32(129.0)
    xc = f32(0.0) if zero else xc
    n = np.floor(xc + _HALF32)
    y = _scale_f32(_ONE32 + _expm1_poly_f32((xc - n) * _LN2_32), n)
    y = f32(0.0) if zero else y
    return x if x != x else y


@_njit
def exp2_f64(x):
    zero = not x > -1076.0
    xc = x if x < 1025.0 else 1025.0
    xc = 0.0 if zero else xc
    n = np.floor(xc + _HALF64)
    y = _scale_f64(_ONE64 + _expm1_poly_f64((xc - n) * _LN2_64), n)
    y = 0.0 if zero else y
    return x if x != x else y


# ---- expm1 -------------------------------------------------------------------------------------
# expm1(x) = 2^n (1 + p) - 1 with p = expm1_poly(r) (same reduction as exp). For n <= 100,
# t = 2^n is a finite float and  t*p + (t - 1)  keeps the accuracy of p near 0 (n = 0: just
# p); for larger n the result is 2^n (1 + p) - 1 scaled in two factors. x is clamped to
# [-18, 89] (f64: [-40, 710]), below which the result rounds to -1. Tiny |x| returns x
# (keeps -0).
@_njit
def _expm1_core_f32(xc):
    """expm1 for xc in [-18, 64] (t = 2^n finite, no large branch), no special values."""
    n = np.floor(xc * _LOG2E32 + _HALF32)
    r = (xc - n * _LN2_HI32) - n * _LN2_LO32
    p = _expm1_poly_f32(r)
    t = _pow2(n)
    return t * p + (t - _ONE32)


@_njit
def _expm1_core_f64(xc):
    n = np.floor(xc * _LOG2E64 + _HALF64)
    r = (xc - n * _LN2_HI64) - n * _LN2_LO64
    p = _expm1_poly_f64(r)
    t = _pow2(n)
    return t * p + (t - _ONE64)


@_njit
def _expm1_f32(xc):
    """expm1 for xc in [-18, 89]: no special values."""
    n = np.floor(xc * _LOG2E32 + _HALF32)
    r = (xc - n * _LN2_HI32) - n * _LN2_LO32
    p = _expm1_poly_f32(r)
    t = _pow2(n if n < f32(100.0) else f32(100.0))
    small = t * p + (t - _ONE32)
    large = _scale_f32(p + _ONE32, n) - _ONE32
    return small if n < f32(100.0) else large


@_njit
def _expm1_f64(xc):
    n = np.floor(xc * _LOG2E64 + _HALF64)
    r = (xc - n * _LN2_HI64) - n * _LN2_LO64
    p = _expm1_poly_f64(r)
    t = _pow2(n if n < 1000.0 else 1000.0)
    small = t * p + (t - _ONE64)
    large = _scale_f64(p + _ONE64, n) - _ONE64
    return small if n < 1000.0 else large


@_njit
def expm1_f32(x):
    xc = x if x < f32(89.0) else f32(89.0)
    xc = xc if xc > f32(-18.0) else f32(-18.0)
    y = _expm1_f32(xc)
    y = x if abs(x) < f32(2.0 ** -25) else y
    return x if x != x else y


@_njit
def expm1_f64(x):
    xc = x if x < 710.0 else 710.0
    xc = xc if xc > -40.0 else -40.0
    y = _expm1_f64(xc)
    y = x if abs(x) < 2.0 ** -54 else y
    return x if x != x else y


# ---- log ---------------------------------------------------------------------------------------
# x = 2^e * m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f), z = s^2 (z <= 0.0295):
#   log(1 + f) = 2 atanh(s) = f - (hfsq - s (hfsq + R(z))),  hfsq = f^2 / 2,
#   R(z) = z T(z) with T fitting 2 (atanh(s)/s - 1) / z on [0, 0.02944] (fdlibm's form);
#   log(x) = e ln2_hi + (f - (hfsq - (s (hfsq + R) + e ln2_lo + corr))).
# Subnormal x is first scaled by 2^23 (f64: 2^54). `corr` is a small additive correction
# (log1p passes the rounding error of 1 + x, divided by 1 + x).
_LT32 = (f32(0.6666666865348816), f32(0.4000012278556824), f32(0.2855082154273987),
         f32(0.2333046793937683))                                  # fit error 1.2e-9
_LT64 = (0.666666666666667, 0.39999999999899505, 0.28571428625975764, 0.22222211134749734,
         0.18182889128565508, 0.15331721490738642, 0.14616451042434167)  # 3.1e-16 (times z)


@_njit
def _log_core_f32(u, corr):
    """log(u) + corr for positive finite u (no special values)."""
    sub = u < f32(1.1754943508222875e-38)
    m, e = _split_exponent(u * f32(8388608.0) if sub else u)
    e = e - f32(23.0) if sub else e
    f = m - _ONE32
    s = f / (_TWO32 + f)
    z = s * s
    c0, c1, c2, c3 = _LT32
    r = z * (c0 + z * (c1 + z * (c2 + z * c3)))
    hfsq = _HALF32 * f * f
    return e * _LN2_HI32 - ((hfsq - (s * (hfsq + r) + (e * _LN2_LO32 + corr))) - f)


@_njit
def _log_core_f64(u, corr):
    sub = u < 2.2250738585072014e-308
    m, e = _split_exponent(u * 18014398509481984.0 if sub else u)   # 2^54
    e = e - 54.0 if sub else e
    f = m - _ONE64
    s = f / (_TWO64 + f)
    z = s * s
    c0, c1, c2, c3, c4, c5, c6 = _LT64
    r = z * (c0 + z * (c1 + z * (c2 + z * (c3 + z * (c4 + z * (c5 + z * c6))))))
    hfsq = _HALF64 * f * f
    return e * _LN2_HI64 - ((hfsq - (s * (hfsq + r) + (e * _LN2_LO64 + corr))) - f)


@_njit
def log_f32(x):
    y = _log_core_f32(x, f32(0.0))
    y = _INF32 if x == _INF32 else y
    y = -_INF32 if x == f32(0.0) else y
    y = _NAN32 if x < f32(0.0) else y
    return x if x != x else y


@_njit
def log_f64(x):
    y = _log_core_f64(x, 0.0)
    y = _INF64 if x == _INF64 else y
    y = -_INF64 if x == 0.0 else y
    y = _NAN64 if x < 0.0 else y
    return x if x != x else y


# ---- log1p -------------------------------------------------------------------------------------
# u = 1 + x rounds; its error c = (1 + x) - u is exact by Fast2Sum (c = x - (u - 1) when
# |x| <= 1, else 1 - (u - x)), and log1p(x) = log(u) + log(1 + c/u) ~ log(u) + c/u.
# u == 1 (|x| <= 2^-24 for f32) returns x: log1p(x) = x (1 - x/2 + ...) rounds to x, and
# -0 stays -0.
@_njit
def log1p_f32(x):
    u = _ONE32 + x
    c = (x - (u - _ONE32)) if abs(x) <= _ONE32 else (_ONE32 - (u - x))
    y = _log_core_f32(u, c / u)
    y = x if u == _ONE32 else y
    y = _INF32 if x == _INF32 else y
    y = -_INF32 if x == -_ONE32 else y
    y = _NAN32 if x < -_ONE32 else y
    return x if x != x else y


@_njit
def log1p_f64(x):
    u = _ONE64 + x
    c = (x - (u - _ONE64)) if abs(x) <= _ONE64 else (_ONE64 - (u - x))
    y = _log_core_f64(u, c / u)
    y = x if u == _ONE64 else y
    y = _INF64 if x == _INF64 else y
    y = -_INF64 if x == -_ONE64 else y
    y = _NAN64 if x < -_ONE64 else y
    return x if x != x else y


# ---- tanh --------------------------------------------------------------------------------------
# tanh(x) = em / (em + 2), em = expm1(2x): accurate in relative terms at every x (no
# cancellation: em + 2 >= 1), odd at 0 (-0 -> -0). x is clamped to +-10 (f64: +-20), where
# tanh already rounds to +-1.
@_njit
def tanh_f32(x):
    xc = x if x < f32(10.0) else f32(10.0)
    xc = xc if xc > f32(-10.0) else f32(-10.0)
    em = _expm1_core_f32(_TWO32 * xc)
    y = em / (em + _TWO32)
    y = x if abs(x) < f32(2.0 ** -25) else y
    return x if x != x else y


@_njit
def tanh_f64(x):
    xc = x if x < 20.0 else 20.0
    xc = xc if xc > -20.0 else -20.0
    em = _expm1_core_f64(_TWO64 * xc)
    y = em / (em + _TWO64)
    y = x if abs(x) < 2.0 ** -54 else y
    return x if x != x else y


# ---- logistic ----------------------------------------------------------------------------------
# sigma(x) = 1 / (1 + e^-x). With e = exp(-|x|) <= 1 (never overflows):
#   x >= 0: 1 / (1 + e);   x < 0: e / (1 + e)   (no 1 - small cancellation for x << 0).
# One division with the numerator selected; exp is inlined by hand for -|x| <= 0 (no upper
# clamp, NaN handled once at the end: 20% faster than calling exp_f32), e = 0 selected for
# -|x| <= -104 (f64: -746) as in exp_f32 (no underflowing product: a saturated sigmoid).
@_njit
def logistic_f32(x):
    xc = -abs(x)
    zero = not xc > f32(-104.0)
    xc = f32(0.0) if zero else xc
    n = np.floor(xc * _LOG2E32 + _HALF32)
    r = (xc - n * _LN2_HI32) - n * _LN2_LO32
    e = _scale_f32(_ONE32 + _expm1_poly_f32(r), n)
    e = f32(0.0) if zero else e
    y = (_ONE32 if x >= f32(0.0) else e) / (_ONE32 + e)
    return x if x != x else y


@_njit
def logistic_f64(x):
    xc = -abs(x)
    zero = not xc > -746.0
    xc = 0.0 if zero else xc
    n = np.floor(xc * _LOG2E64 + _HALF64)
    r = (xc - n * _LN2_HI64) - n * _LN2_LO64
    e = _scale_f64(_ONE64 + _expm1_poly_f64(r), n)
    e = 0.0 if zero else e
    y = (_ONE64 if x >= 0.0 else e) / (_ONE64 + e)
    return x if x != x else y


# ---- erf ---------------------------------------------------------------------------------------
# f32, two branches computed and selected:
#   |x| < 1:  erf(x) = x + x P(x^2), P fits erf(sqrt z)/sqrt z - 1 on z in [0, 1] (fit error
#             1.2e-9; writing x + x P keeps 2/sqrt(pi)'s rounding error out of the result).
#   |x| >= 1: erf(|x|) = 1 - erfc(|x|), erfc(a) = exp(Q(a - 2.46) - a^2), Q fits
#             log(erfc(a)) + a^2 on [1, 3.92] (degree 8; error of erf 0.02 ulp); |x| is
#             clamped to 3.92, where erf rounds to 1. Sign restored at the end.
# f64 uses libm's erf (a scalar call: the loop around it does not vectorize).
_ERF_SMALL32 = (f32(0.12837916612625122), f32(-0.3761262595653534), f32(0.11283594369888306),
                f32(-0.02685421146452427), f32(0.005189087241888046),
                f32(-0.000801686430349946), f32(7.875874871388078e-05))
_ERF_LQ32 = (f32(-1.5426175594329834), f32(-0.3572218716144562), f32(0.05743032321333885),
             f32(-0.011211730539798737), f32(0.0022513647563755512),
             f32(-0.0004392116388771683), f32(8.096426608972251e-05),
             f32(-1.3813678378937766e-05), f32(1.6704327663319418e-06))


@_njit
def _erf_small(x):
    """erf(x) = x + x P(x^2) for |x| < 1 (float32)."""
    z = x * x
    c0, c1, c2, c3, c4, c5, c6 = _ERF_SMALL32
    return x + x * (c0 + z * (c1 + z * (c2 + z * (c3 + z * (c4 + z * (c5 + z * c6))))))


@_njit
def erf_f32(x):
    small = _erf_small(x)
    a = abs(x)
    a = a if a < f32(3.92) else f32(3.92)
    v = a - f32(2.46)
    q0, q1, q2, q3, q4, q5, q6, q7, q8 = _ERF_LQ32
    q = q0 + v * (q1 + v * (q2 + v * (q3 + v * (q4 + v * (q5 + v * (q6 + v * (q7 + v * q8)))))))
    big = _ONE32 - _exp_core_f32(q - a * a)
    big = -big if x < f32(0.0) else big
    y = small if abs(x) < _ONE32 else big
    return x if x != x else y


@_njit
def erf_f64(x):
    return math.erf(x)


# ---- erfc --------------------------------------------------------------------------------------
# f32 computes in float64 (8 lanes a vector), where a^2 is exact (a has 24 bits) and the results
# below float32's normal range are ordinary numbers, then rounds once. Each piece needs only
# float32's accuracy: the fits are good to 5e-9 (1/12 of a float32 ulp), which keeps the
# degrees low; every polynomial is Horner's (the loop is bound by the number of vector
# operations, not by their latency: Estrin's shorter chains measured 10 % slower).
#   a = |x| in [0, 2):  erfc(a) = exp(-a^2) erfcx(a), erfcx(a) = e^(a^2) erfc(a) fitted in
#                   a - 1 (degree 12, fit error 4.6e-9 of 0.26-1; a third branch for small
#                   |x|, 1 - erf(x), measured 15 % slower in all);
#   a in [2, 10.13]:  erfc(a) = exp(-a^2) t R(t), t = 1/a, R(t) = a erfcx(a) fitted in
#                   t - 0.3 (degree 8, fit error 3.9e-9 of 0.51-0.56);
#   exp(-a^2) = 2^n e^r, n = round(-a^2 / ln2) >= -148 (2^n is a normal float64: one factor),
#                   r = -a^2 - n ln2 with ln2 in one float64 (|n| ln2's rounding is 3e-15 of
#                   r's size: nothing at this accuracy), e^r by a degree-6 fit on
#                   [-0.35, 0.35] (2.7e-9);
#   a > 10.1276247 (erfc < 2^-150): 0, selected (no underflowing conversion); x < 0:
#   2 - erfc(a) (>= 1: no cancellation).
# Every float32 in [-10.2, 10.2] checked against libm's erfc in float64: 0.60 ulp at most.
# f64 uses libm's erfc (a scalar call: the loop around it does not vectorize).
_ERFCX_NEAR64 = (2.0366505229933425e-05, -6.355922693122852e-05, 0.00012624266012577676,
                 -0.000357540336735532, 0.0010548404789110766, -0.0027841248484721426,
                 0.006968790017677325, -0.01665741029977554, 0.03757246655498367,
                 -0.07922753077964449, 0.15437155526977536, -0.2732119946538471,
                 0.427583576155807)
_ERFC_FAR64 = (-0.2858268892822591, -0.18676443959085637, 0.34456528333147185,
               -0.16085536686124313, -0.08158449287191048, 0.20809933930299873,
               -0.1355837105695824, -0.13460109551332297, 0.5416332030474172)
_ERFC_EXP64 = (0.0013942147844205415, 0.008375958626588976, 0.04166634028910043,
               0.16666405420231623, 0.5000000049985063, 1.0000000400118612, 1.0)


@_njit
def erfc_f32(x):
    d = f64(x)
    a = abs(d)
    ac = a if a < 10.13 else 10.13
    u = ac - _ONE64
    n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12 = _ERFCX_NEAR64
    near = n12 + u * (n11 + u * (n10 + u * (n9 + u * (n8 + u * (n7 + u * (n6 + u * (n5 + u * (
        n4 + u * (n3 + u * (n2 + u * (n1 + u * n0)))))))))))
    t = _ONE64 / (ac if ac > 2.0 else 2.0)
    v = t - 0.3
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = _ERFC_FAR64
    far = t * (r8 + v * (r7 + v * (r6 + v * (r5 + v * (r4 + v * (r3 + v * (r2 + v * (
        r1 + v * r0))))))))
    e = -(ac * ac)
    n = np.floor(e * _LOG2E64 + _HALF64)
    r = e - n * _LN2_64
    c0, c1, c2, c3, c4, c5, c6 = _ERFC_EXP64
    expe = (c6 + r * (c5 + r * (c4 + r * (c3 + r * (c2 + r * (c1 + r * c0)))))) * _pow2(n)
    big = expe * (near if ac < 2.0 else far)
    big = 0.0 if a > 10.1276247 else big
    big = 2.0 - big if d < 0.0 else big
    return x if x != x else f32(big)


@_njit
def erfc_f64(x):
    return math.erfc(x)


# ---- the table the code generator reads --------------------------------------------------------
# (by name: scalar_ops.MATHFNS, which does not import numba)
FUNCS = {name: {dt: globals()[fn] for dt, fn in by_dt.items()} for name, by_dt in MATHFNS.items()}
