"""fnad.numpy's less common elementwise functions: the float representation (frexp,
ldexp, modf, nextafter, spacing), integer ones (gcd, lcm, bitwise_count, packbits,
unpackbits) and the Bessel function i0.

fnad has no bitcast primitive, so frexp finds the exponent from log2 and corrects it
by one either way, and powers of two are built exactly as products of 2^(2^b) factors;
ldexp, nextafter and spacing build on that. i0 is Cephes' Chebyshev expansion (NumPy's),
whose derivative is that of the expansion. Built on fnad.numpy's ufuncs and lax.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import dtypes, lax
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    check_arraylike,
    ensure_array,
    promote_args_inexact,
    promote_args_numeric,
    promote_dtypes,
    promote_dtypes_inexact,
)
from fnad.numpy._logic import _where, copysign, isinf, isnan, less
from fnad.numpy._shape import broadcast_arrays
from fnad.numpy._ufuncs import (
    absolute,
    add,
    ceil,
    exp,
    floor,
    floor_divide,
    log2,
    multiply,
    sqrt,
    subtract,
    true_divide,
)
from fnad.primitives import logic as lg

__all__ = ["bitwise_count", "frexp", "gcd", "i0", "lcm", "ldexp", "modf", "nextafter",
           "packbits", "spacing", "unpackbits"]


# ---- exact powers of two ---------------------------------------------------------------------
def _exp_range(dt) -> tuple[int, int]:
    """(lo, hi): k < lo makes m·2^k (0.5 <= |m| < 1) round to 0, k > hi makes it overflow."""
    info = dtypes.finfo(dt)
    return int(info.minexp) - int(info.nmant) - 2, int(info.maxexp) + 1


def _pow2(k, dt):
    """2^k exactly, for integer-valued float k with |k| at most half the exponent range: the
    product of 2^(2^b) over the set bits b of |k| (inverted for k < 0)."""
    mag = absolute(k)
    lo, hi = _exp_range(dt)
    out = lax.full_like(mag, 1.0)
    for b in range((max(-lo, hi) // 2 + 1).bit_length()):
        bit = lg.ne(lax.rem(floor(true_divide(mag, 2.0 ** b)), lax.full_like(mag, 2.0)), 0.0)
        out = _where(bit, multiply(out, 2.0 ** (2 ** b)), out)
    return _where(less(k, 0), true_divide(1.0, out), out)


def _scale(m, k):
    """m · 2^k for integer-valued float k (rounded once, to 0 or inf beyond the range)."""
    lo, hi = _exp_range(m.dtype)
    k = lax.clamp(float(lo), k, float(hi))
    half = floor(multiply(k, 0.5))
    return multiply(multiply(m, _pow2(half, m.dtype)), _pow2(subtract(k, half), m.dtype))


def _frexp(x):
    """(m, e) with x = m·2^e, 0.5 <= |m| < 1, e a float of x's dtype; (x, 0) for 0, inf, nan."""
    special = lg.bitwise_or(lg.bitwise_or(isinf(x), isnan(x)), lg.eq(x, 0))
    safe = _where(special, lax.full_like(x, 1.0), x)
    info = dtypes.finfo(x.dtype)
    sub = lg.lt(absolute(safe), float(info.tiny))              # subnormal: scale up first
    safe = _where(sub, multiply(safe, 2.0 ** (int(info.nmant) + 1)), safe)
    e = add(floor(log2(absolute(safe))), 1.0)                 # may be off by one either way
    m = _scale(safe, -e)
    e = _where(sub, subtract(e, float(int(info.nmant) + 1)), e)
    big, small = lg.ge(absolute(m), 1.0), lg.lt(absolute(m), 0.5)
    m = _where(big, multiply(m, 0.5), _where(small, multiply(m, 2.0), m))
    e = _where(big, add(e, 1.0), _where(small, subtract(e, 1.0), e))
    return _where(special, x, m), _where(special, lax.full_like(e, 0.0), e)


# ---- float representation --------------------------------------------------------------------
def frexp(x: ArrayLike, /) -> tuple[Array, Array]:
    """(mantissa, exponent) with x = mantissa·2^exponent, 0.5 <= |mantissa| < 1 (an int32
    exponent; (x, 0) for 0, inf and NaN)."""
    check_arraylike("frexp", x)
    (x,) = promote_dtypes_inexact(x)
    if dtypes.is_complex(x.dtype):
        raise TypeError("frexp does not support complex-valued inputs")
    m, e = _frexp(x)
    return m, lg.convert_element_type(e, np.int32)


def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1·2^x2 for an integer x2 (the result in x1's inexact dtype)."""
    check_arraylike("ldexp", x1, x2)
    x1, x2 = ensure_array(x1), ensure_array(x2)
    if dtypes.is_complex(x1.dtype) or dtypes.is_inexact(x2.dtype):
        raise ValueError(f"ldexp not supported for input types {(x1.dtype, x2.dtype)}: x1 must "
                         "be real and x2 an integer")
    (x1,) = promote_args_inexact("ldexp", x1)
    x1, x2 = broadcast_arrays(x1, x2)
    m, e = _frexp(x1)
    e = add(e, lg.convert_element_type(x2, x1.dtype))
    return _where(lg.bitwise_or(isinf(x1), lg.eq(x1, 0)), x1, _scale(m, e))


def modf(x: ArrayLike, /, out=None) -> tuple[Array, Array]:
    """(fractional part, integral part) of x, both with x's sign."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to fnad.numpy.modf is not supported.")
    check_arraylike("modf", x)
    (x,) = promote_dtypes_inexact(x)
    whole = _where(lg.ge(x, 0), floor(x), ceil(x))
    return subtract(x, whole), whole


def nextafter(x: ArrayLike, y: ArrayLike, /) -> Array:
    """The next representable value after x in the direction of y (y itself if x == y)."""
    x, y = (ensure_array(a) for a in promote_args_inexact("nextafter", x, y))
    if dtypes.is_complex(x.dtype):
        raise ValueError("nextafter is not defined for complex inputs")
    x, y = broadcast_arrays(x, y)
    info = dtypes.finfo(x.dtype)
    m, e = _frexp(x)
    # The spacing above |x| in [2^(e-1), 2^e) is 2^(e - nmant - 1) (the subnormal one below).
    e = lax.max(e, lax.full_like(e, float(info.minexp + 1)))
    ulp = _scale(lax.full_like(x, 1.0), subtract(e, float(info.nmant + 1)))
    up = lg.gt(y, x)                                             # direction of the step
    toward_zero = lg.ne(up, lg.gt(x, 0))
    at_power = lg.bitwise_and(lg.eq(absolute(m), 0.5), lg.gt(e, float(info.minexp + 1)))
    step = _where(lg.bitwise_and(toward_zero, at_power), multiply(ulp, 0.5), ulp)
    out = _where(up, add(x, step), subtract(x, step))
    tiny = lax.full_like(x, float(info.smallest_subnormal))
    out = _where(lg.eq(x, 0), _where(up, tiny, lax.neg(tiny)), out)
    biggest = lax.full_like(x, float(info.max))
    out = _where(isinf(x), copysign(biggest, x), out)            # inf toward y: the max
    out = _where(lg.eq(x, y), y, out)
    out = _where(lg.bitwise_or(isnan(x), isnan(y)), add(x, y), out)
    # (the steps' constants are strong; the result is weak where both inputs are, as jax's)
    return lg.convert_element_type(out, out.dtype, x.aval.weak_type and y.aval.weak_type)


def spacing(x: ArrayLike, /) -> Array:
    """The distance from x to the next representable value away from zero (with x's sign)."""
    (x,) = promote_args_inexact("spacing", x)
    x = ensure_array(x)
    if dtypes.is_complex(x.dtype):
        raise ValueError("fnad.numpy.spacing is not defined for complex inputs.")
    inf = lax.full(x.shape, np.inf, x.dtype)                    # strong: so is the result
    if x.dtype == np.float16:                                   # as NumPy (and JAX)
        return subtract(nextafter(x, inf), x)
    result = subtract(nextafter(x, copysign(inf, x)), x)
    tiny = float(dtypes.finfo(x.dtype).smallest_subnormal)
    return _where(lg.eq(result, 0), copysign(lax.full_like(x, tiny), x), result)


# ---- integers --------------------------------------------------------------------------------
def _gcd_cond(xs):
    from fnad.numpy._reductions import any as _any
    return _any(lg.ne(xs[1], 0))


def _gcd_body(xs):
    x1, x2 = xs
    nz = lg.ne(x2, 0)
    # (no swap to keep x1 >= x2: rem does it, and a swap loops forever on the negative
    # values that |most negative int| leaves, where JAX's gcd hangs)
    return (_where(nz, x2, x1),
            _where(nz, lax.rem(x1, _where(nz, x2, lax.full_like(x2, 1))), lax.full_like(x2, 0)))


def gcd(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The greatest common divisor of |x1| and |x2| (integers), by Euclid's algorithm in a
    while_loop (so it runs under jit and vmap)."""
    check_arraylike("gcd", x1, x2)
    x1, x2 = (ensure_array(a) for a in promote_dtypes(x1, x2))
    if not dtypes.is_int(x1.dtype):
        raise ValueError(f"Arguments to fnad.numpy.gcd must be integers, got {x1.dtype}")
    x1, x2 = broadcast_arrays(x1, x2)
    return absolute(lax.while_loop(_gcd_cond, _gcd_body, (absolute(x1), absolute(x2)))[0])


def lcm(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The least common multiple of |x1| and |x2| (integers; 0 if either is 0)."""
    check_arraylike("lcm", x1, x2)
    x1, x2 = (ensure_array(a) for a in promote_dtypes(x1, x2))
    x1, x2 = absolute(x1), absolute(x2)
    if not dtypes.is_int(x1.dtype):
        raise ValueError(f"Arguments to fnad.numpy.lcm must be integers, got {x1.dtype}")
    d = gcd(x1, x2)
    zero = lg.eq(d, 0)
    return _where(zero, lax.full_like(d, 0),
                  multiply(x1, floor_divide(x2, _where(zero, lax.full_like(d, 1), d))))


def bitwise_count(x: ArrayLike, /) -> Array:
    """The number of 1 bits in |x| (uint8, as NumPy)."""
    (x,) = promote_args_numeric("bitwise_count", x)
    x = ensure_array(x)
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"bitwise_count requires an integer or bool input, got {x.dtype}")
    return lg.convert_element_type(lax.population_count(absolute(x)), np.uint8)


# ---- Bessel i0 -------------------------------------------------------------------------------
# Cephes' Chebyshev coefficients for exp(-x)·I0(x) on [0, 8] and on (8, inf) (NumPy's _i0A/B).
_I0A = (-4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16,
        1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14,
        -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11,
        9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
        -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07,
        1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05,
        -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824,
        0.0016394756169413357, -0.004324309995050576, 0.010546460394594998,
        -0.02373741480589947, 0.04930528423967071, -0.09490109704804764,
        0.17162090152220877, -0.3046826723431984, 0.6767952744094761)
_I0B = (-7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17,
        3.461222867697461e-17, -2.8276239805165836e-16, -3.425485619677219e-16,
        1.7725601330565263e-15, 3.8116806693526224e-15, -9.554846698828307e-15,
        -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
        7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11,
        -3.1499165279632416e-11, 1.1889147107846439e-11, 4.94060238822497e-10,
        3.3962320257083865e-09, 2.266668990498178e-08, 2.0489185894690638e-07,
        2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943,
        0.8044904110141088)


def _chbevl(t, coeffs):
    """Σ c_k T_k(t/2)-style Chebyshev series by Clenshaw's recurrence (Cephes' chbevl)."""
    b0, b1, b2 = lax.full_like(t, coeffs[0]), lax.full_like(t, 0.0), None
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = add(subtract(multiply(t, b1), b2), c)
    return multiply(subtract(b0, b2), 0.5)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind, order 0 (real floats)."""
    (x,) = promote_args_inexact("i0", x)
    x = ensure_array(x)
    if not dtypes.is_float(x.dtype):
        raise ValueError(f"Unsupported input type to fnad.numpy.i0: {x.dtype}")
    # |x| with a zero tangent at 0, where i0 is flat (abs's slope there would be 1).
    ax = _where(lg.eq(x, 0), lax.full_like(x, 0.0), absolute(x))
    small = lg.le(ax, 8.0)
    xs = _where(small, ax, lax.full_like(x, 8.0))                # safe inputs per branch
    xl = _where(small, lax.full_like(x, 9.0), ax)
    near = _chbevl(subtract(multiply(xs, 0.5), 2.0), _I0A)                     # exp(-x)·I0(x)
    far = true_divide(_chbevl(subtract(true_divide(32.0, xl), 2.0), _I0B), sqrt(xl))
    return multiply(exp(ax), _where(small, near, far))


# ---- packbits, unpackbits ------------------------------------------------------------------
def _bitorder(name: str, bitorder: str) -> bool:
    if bitorder not in ("big", "little"):
        raise ValueError(f"fnad.numpy.{name}: bitorder must be 'big' or 'little', got "
                         f"{bitorder!r}")
    return bitorder == "little"


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big"):
    """The truth values of `a` (bool or integers) packed 8 per uint8 along `axis` (the
    flattened array by default), padded with zeros to a multiple of 8; 'big' puts the
    first element in the most significant bit."""
    import fnad.numpy as jnp
    little = _bitorder("packbits", bitorder)
    check_arraylike("packbits", a)
    arr = ensure_array(a)
    if not (dtypes.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise TypeError(f"fnad.numpy.packbits: expected an integer or boolean array, got "
                        f"{arr.dtype}")
    if axis is None:
        arr, axis = jnp.ravel(arr), 0
    axis = axis % max(arr.ndim, 1)
    bits = (arr != 0).astype(np.uint8)
    pad = -bits.shape[axis] % 8
    if pad:
        widths = [(0, 0)] * bits.ndim
        widths[axis] = (0, pad)
        bits = jnp.pad(bits, widths)
    shape = bits.shape[:axis] + (bits.shape[axis] // 8, 8) + bits.shape[axis + 1:]
    weights = np.array([1 << (i if little else 7 - i) for i in range(8)], np.uint8)
    weights = weights.reshape((8,) + (1,) * (bits.ndim - axis - 1))
    return jnp.sum(bits.reshape(shape) * weights, axis=axis + 1, dtype=np.uint8)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None,
               bitorder: str = "big"):
    """The bits of the uint8 array `a` as 0/1 uint8, 8 per element along `axis` (the
    flattened array by default); `count` keeps that many (negative: drops from the end)."""
    import fnad.numpy as jnp
    little = _bitorder("unpackbits", bitorder)
    check_arraylike("unpackbits", a)
    arr = ensure_array(a)
    if arr.dtype != np.uint8:
        raise TypeError(f"fnad.numpy.unpackbits: expected a uint8 array, got {arr.dtype}")
    if axis is None:
        arr, axis = jnp.ravel(arr), 0
    axis = axis % max(arr.ndim, 1)
    shifts = np.array([i if little else 7 - i for i in range(8)], np.uint8)
    shifts = shifts.reshape((8,) + (1,) * (arr.ndim - axis - 1))
    bits = (jnp.expand_dims(arr, axis + 1) >> shifts) & np.uint8(1)
    shape = arr.shape[:axis] + (arr.shape[axis] * 8,) + arr.shape[axis + 1:]
    bits = bits.reshape(shape)
    if count is not None:
        n = operator.index(count)
        size = shape[axis]
        stop = n if n >= 0 else size + n
        if stop > size:                                      # zeros padded, as NumPy
            widths = [(0, 0)] * bits.ndim
            widths[axis] = (0, stop - size)
            bits = jnp.pad(bits, widths)
        else:
            bits = lax.slice_in_dim(bits, 0, max(stop, 0), axis=axis)
    return bits
