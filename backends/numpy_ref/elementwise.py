"""NumPy implementations of the elementwise arithmetic and transcendental primitives.

Floating-point warnings are silenced: like XLA, fnad returns inf/nan quietly
(`jax_debug_nans` is the way to catch them).
"""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import elementwise as ew

try:  # NumPy 2 keeps the error state in a context variable: set it directly (0.1 µs)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _QUIET = _make_extobj(all="ignore")
except ImportError:  # pragma: no cover - other NumPy versions: the public (slower) way
    _extobj_contextvar = None


def quietly(fn):
    """Run a NumPy function without floating-point warnings (np.errstate(all='ignore'))."""
    if _extobj_contextvar is None:  # pragma: no cover
        def impl(*args, **params):
            with np.errstate(all="ignore"):
                return fn(*args, **params)
    else:
        def impl(*args, **params):
            token = _extobj_contextvar.set(_QUIET)
            try:
                return fn(*args, **params)
            finally:
                _extobj_contextvar.reset(token)
    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def quiet_for_bfloat16(fn):
    """`fn(a, b)`, run `quietly` where `a` is bfloat16 (ml_dtypes, kind 'V'): ml_dtypes'
    comparisons of a NaN raise NumPy's 'invalid value' warning (signalling compares); NumPy's
    own float comparisons are quiet, so they skip the extra cost."""
    quiet = quietly(fn)

    def impl(a, b):
        return quiet(a, b) if getattr(a, "dtype", np.dtype(np.int8)).kind == "V" else fn(a, b)
    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def _special():
    from scipy import special   # imported on first use: it is slow to import
    return special


def _div(x, y):
    if np.result_type(x).kind not in "iu":
        return np.divide(x, y)
    q = np.floor_divide(x, y)                          # lax.div rounds toward zero
    fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return (q + fix).astype(q.dtype)


def _round(x, rounding_method):
    if rounding_method == ew.TO_NEAREST_EVEN:
        return np.rint(x)
    t = np.trunc(x)                                    # halfway cases away from zero
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(np.result_type(x))


def _complex(x, y):
    cdt = np.complex64 if np.result_type(x) == np.float32 else np.complex128
    out = np.empty(np.broadcast_shapes(np.shape(x), np.shape(y)), cdt)
    out.real = x
    out.imag = y
    return out


def _integer_pow(x, *, y):
    """x ** y for a static int y: a float x times itself for |y| <= 8 (as the numba kernels
    and XLA do: bit for bit the same, and ~100x faster than np.power's pow call), else
    np.power (integers wrap the same either way)."""
    x = np.asarray(x)
    if y == 0:
        return np.ones_like(x)
    if abs(y) > 8 or x.dtype.kind not in "fc":
        return np.power(x, y)
    p = x
    for _ in range(abs(y) - 1):
        p = p * x
    return (np.ones((), x.dtype) / p) if y < 0 else p


def _logistic(x):
    """1 / (1 + exp(-x)), scipy.special.expit's formula (without importing scipy: ~0.3 s),
    in float32 for 16-bit floats; exp(-x) = inf gives the limit 0."""
    x = np.asarray(x)
    w = x.astype(np.float32) if x.dtype.itemsize < 4 else x
    return (1 / (1 + np.exp(-w))).astype(x.dtype, copy=False)


def _same_dtype(fn):
    """scipy.special may compute in a wider type: cast back to the input's dtype."""
    def impl(x):
        return np.asarray(fn(x), dtype=np.result_type(x))
    return impl


# ---- gamma family: scipy.special in float64, then rounded to the input's dtype, with jax's
# values at the special points where scipy's differ (checked against jax 0.10):
#   lgamma(-inf) = inf (scipy: -inf); digamma = NaN at every pole 0, -1, -2, ... and -inf
#   (scipy: -inf/+inf at -0/+0); polygamma(m, x) = NaN unless m is a whole number >= 0, and
#   for m >= 1: NaN at x = +inf (scipy: 0), at a pole inf for odd m and NaN for even m.
def _in_float64(fn):
    def impl(*xs):
        dt = np.result_type(*xs)
        return np.asarray(fn(*[np.asarray(x, np.float64) for x in xs]), dt)
    impl.__name__ = fn.__name__
    return impl


def _at_pole(x):
    """x is 0, a negative integer or -inf (floor(-inf) = -inf)."""
    return (x <= 0) & (np.floor(x) == x)


def _lgamma(x):
    return np.where(x == -np.inf, np.inf, _special().gammaln(x))


def _digamma(x):
    return np.where(_at_pole(x), np.nan, _special().psi(x))


def _polygamma(m, x):
    m, x = np.broadcast_arrays(m, x)
    whole = (m >= 0) & (np.floor(m) == m) & (m != np.inf)
    order = np.where(whole, m, 1.0)
    y = np.where(order == 0, _digamma(x), _special().polygamma(order, x))
    y = np.where((order > 0) & (x == np.inf), np.nan, y)
    y = np.where((order > 0) & _at_pole(x), np.where(order % 2 == 1, np.inf, np.nan), y)
    return np.where(whole, y, np.nan)


# ---- incomplete gamma -------------------------------------------------------------------------
# P(a, x) and Q = 1 - P: scipy.special.gammainc / gammaincc in float64, rounded to the
# operands' dtype, with jax's values where scipy's differ (checked against jax 0.10):
#   P(0, x) = NaN for 0 < x < 1 (scipy: 1); P(inf, x) = Q(inf, x) = NaN for finite x >= 1
#   (scipy: 0 and 1); P(inf, inf) = 1 and Q(inf, inf) = 0 (scipy: NaN).
def _igamma_jax_values(a, x, out, inf_inf):
    out = np.where((a == np.inf) & (x >= 1) & (x < np.inf), np.nan, out)
    return np.where((a == np.inf) & (x == np.inf), inf_inf, out)


def _igamma(a, x):
    out = np.where((a == 0) & (x > 0) & (x < 1), np.nan, _special().gammainc(a, x))
    return _igamma_jax_values(a, x, out, 1.0)


def _igammac(a, x):
    return _igamma_jax_values(a, x, _special().gammaincc(a, x), 0.0)


# ∂P/∂a (igamma_grad_a) and the sample derivative dx/da = -(∂P/∂a)/(∂P/∂x)
# (random_gamma_grad) have no SciPy function. XLA's algorithm (xla/client/lib/math.cc, which
# jax.lax runs), here in float64 whatever the operands' dtype:
#   x <= 1 or x <= a: the series P = x^a·e^(-x)/Γ(a+1)·Σₙ xⁿ/((a+1)···(a+n)), the a-derivative
#        of each term carried alongside (at most _SERIES_TERMS terms; XLA has no limit);
#   else: Q by Legendre's continued fraction p_k/q_k (at most 2000 terms), ∂/∂a by
#        differentiating the recurrences of p_k and q_k (all rescaled by eps when |p_k| > 1/eps);
#   each entry stops when its derivative's last term is below float64's eps (relative for the
#   series, absolute for the fraction, as XLA's).
# Special values are XLA's: 0 at x = 0; NaN for x < 0, a <= 0 or a NaN operand (and x = inf);
# where log(x^a·e^(-x)/Γ(a)) is below -log(max) of the dtype jax computes in (float32 for 16-
# and 32-bit floats) the entry skips the loop, as in XLA, and its first terms give the value.
_SERIES_TERMS = 100_000
_EPS64 = float(np.finfo(np.float64).eps)


def _igamma_series_grad(ax, x, a, on, sample):
    """The series' a-derivative: ∂P/∂a, or -(∂P/∂a)/(∂P/∂x) when `sample` (flat float64)."""
    r, c, ans = a.copy(), np.ones_like(a), np.ones_like(a)
    dc_da, dans_da = np.zeros_like(a), np.zeros_like(a)
    idx = np.flatnonzero(on)
    for _ in range(_SERIES_TERMS):
        if not idx.size:
            break
        xi, ri = x[idx], r[idx] + 1.0
        dc = dc_da[idx] * (xi / ri) - (c[idx] * xi) / (ri * ri)   # d/da of c·x/r
        dans = dans_da[idx] + dc
        ci = c[idx] * (xi / ri)
        r[idx], c[idx], ans[idx] = ri, ci, ans[idx] + ci
        dc_da[idx], dans_da[idx] = dc, dans
        idx = idx[np.abs(dc / dans) > _EPS64]
    dlogax_da = np.log(x) - _special().psi(a + 1.0)
    if sample:
        return -(dans_da + ans * dlogax_da) * x / a
    return ax * (ans * dlogax_da + dans_da) / a


def _igammac_fraction_grad(ax, x, a, on, sample):
    """The continued fraction's a-derivative: ∂Q/∂a, or -(∂Q/∂a)/(∂P/∂x) when `sample`
    (the caller negates both: ∂P/∂a = -∂Q/∂a)."""
    y = 1.0 - a
    z = x + y + 1.0
    pkm2, qkm2, pkm1, qkm1 = np.ones_like(x), x.copy(), x + 1.0, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (np.zeros_like(x), np.zeros_like(x), np.zeros_like(x), -x)
    dans_da = (dpkm1 - ans * dqkm1) / qkm1
    idx = np.flatnonzero(on)
    for k in range(1, 2001):
        if not idx.size:
            break
        y[idx] += 1.0
        z[idx] += 2.0
        yi, zi = y[idx], z[idx]
        yc = yi * k
        p1, q1, p2, q2 = pkm1[idx], qkm1[idx], pkm2[idx], qkm2[idx]
        d_p1, d_q1, d_p2, d_q2 = dpkm1[idx], dqkm1[idx], dpkm2[idx], dqkm2[idx]
        pk, qk = p1 * zi - p2 * yc, q1 * zi - q2 * yc
        nz = qk != 0
        ansi = np.where(nz, pk / qk, ans[idx])
        dpk = d_p1 * zi - p1 - d_p2 * yc + p2 * k                # d/da of the recurrences
        dqk = d_q1 * zi - q1 - d_q2 * yc + q2 * k
        dans = np.where(nz, (dpk - ansi * dqk) / qk, dans_da[idx])
        more = np.where(nz, np.abs(dans - dans_da[idx]), 1.0) > _EPS64
        scale = np.where(np.abs(pk) > 1.0 / _EPS64, _EPS64, 1.0)
        pkm2[idx], pkm1[idx], qkm2[idx], qkm1[idx] = p1 * scale, pk * scale, q1 * scale, \
            qk * scale
        dpkm2[idx], dpkm1[idx], dqkm2[idx], dqkm1[idx] = d_p1 * scale, dpk * scale, \
            d_q1 * scale, dqk * scale
        ans[idx], dans_da[idx] = ansi, dans
        idx = idx[more]
    dlogax_da = np.log(x) - _special().psi(a)
    if sample:
        return -(dans_da + ans * dlogax_da) * x
    return ax * (ans * dlogax_da + dans_da)


def _igamma_grad(a, x, sample):
    dt = np.result_type(a, x)
    limit = -np.log(np.finfo(np.float64 if dt.itemsize > 4 else np.float32).max)
    a, x = (np.array(v, np.float64).ravel() for v in np.broadcast_arrays(a, x))
    is_nan = np.isnan(a) | np.isnan(x)
    x_zero = x == 0
    domain = (x < 0) | (a <= 0)
    use_fraction = (x > 1) & (x > a)
    log_ax = a * np.log(x) - x - _special().gammaln(a)
    on = ~(x_zero | domain | (log_ax < limit) | is_nan)
    ax = np.exp(log_ax)
    out = np.where(use_fraction,
                   -_igammac_fraction_grad(ax, x, a, on & use_fraction, sample),
                   _igamma_series_grad(ax, x, a, on & ~use_fraction, sample))
    out = np.where(x_zero, 0.0, out)
    return np.where(domain | is_nan, np.nan, out)


def _igamma_grad_a(a, x):
    shape = np.broadcast_shapes(np.shape(a), np.shape(x))
    return np.asarray(_igamma_grad(a, x, sample=False).reshape(shape), np.result_type(a, x))


def _random_gamma_grad(a, x):
    shape = np.broadcast_shapes(np.shape(a), np.shape(x))
    return np.asarray(_igamma_grad(a, x, sample=True).reshape(shape), np.result_type(a, x))


impl_rules[ew.add_p] = quietly(np.add)              # inf - inf: nan, quietly
impl_rules[ew.add_any_p] = quietly(np.add)
impl_rules[ew.sub_p] = quietly(np.subtract)
impl_rules[ew.mul_p] = quietly(np.multiply)
impl_rules[ew.div_p] = quietly(_div)
impl_rules[ew.neg_p] = np.negative
impl_rules[ew.rem_p] = quietly(np.fmod)
impl_rules[ew.pow_p] = quietly(np.power)
impl_rules[ew.integer_pow_p] = quietly(_integer_pow)
impl_rules[ew.square_p] = quietly(np.square)
impl_rules[ew.max_p] = quiet_for_bfloat16(np.maximum)
impl_rules[ew.min_p] = quiet_for_bfloat16(np.minimum)
impl_rules[ew.abs_p] = np.abs
impl_rules[ew.sign_p] = quietly(np.sign)
impl_rules[ew.floor_p] = np.floor
impl_rules[ew.ceil_p] = np.ceil
impl_rules[ew.round_p] = quietly(_round)
impl_rules[ew.exp_p] = quietly(np.exp)
impl_rules[ew.exp2_p] = quietly(np.exp2)
impl_rules[ew.log_p] = quietly(np.log)
impl_rules[ew.log1p_p] = quietly(np.log1p)
impl_rules[ew.expm1_p] = quietly(np.expm1)
impl_rules[ew.tanh_p] = quietly(np.tanh)
impl_rules[ew.logistic_p] = quietly(_logistic)
impl_rules[ew.sqrt_p] = quietly(np.sqrt)
impl_rules[ew.rsqrt_p] = quietly(lambda x: np.reciprocal(np.sqrt(x)))
impl_rules[ew.cbrt_p] = np.cbrt
impl_rules[ew.sin_p] = quietly(np.sin)
impl_rules[ew.cos_p] = quietly(np.cos)
impl_rules[ew.tan_p] = quietly(np.tan)
impl_rules[ew.asin_p] = quietly(np.arcsin)
impl_rules[ew.acos_p] = quietly(np.arccos)
impl_rules[ew.atan_p] = np.arctan
impl_rules[ew.atan2_p] = np.arctan2
impl_rules[ew.sinh_p] = quietly(np.sinh)
impl_rules[ew.cosh_p] = quietly(np.cosh)
impl_rules[ew.asinh_p] = np.arcsinh
impl_rules[ew.acosh_p] = quietly(np.arccosh)
impl_rules[ew.atanh_p] = quietly(np.arctanh)
impl_rules[ew.erf_p] = _same_dtype(lambda x: _special().erf(x))
impl_rules[ew.erfc_p] = _same_dtype(lambda x: _special().erfc(x))
impl_rules[ew.erf_inv_p] = quietly(_same_dtype(lambda x: _special().erfinv(x)))
impl_rules[ew.lgamma_p] = quietly(_in_float64(_lgamma))
impl_rules[ew.digamma_p] = quietly(_in_float64(_digamma))
impl_rules[ew.polygamma_p] = quietly(_in_float64(_polygamma))
impl_rules[ew.igamma_p] = quietly(_in_float64(_igamma))
impl_rules[ew.igammac_p] = quietly(_in_float64(_igammac))
impl_rules[ew.igamma_grad_a_p] = quietly(_igamma_grad_a)
impl_rules[ew.random_gamma_grad_p] = quietly(_random_gamma_grad)
impl_rules[ew.real_p] = np.real
impl_rules[ew.imag_p] = np.imag
impl_rules[ew.complex_p] = _complex
impl_rules[ew.conj_p] = np.conj

# the rest of the family: primitives/bits.py and primitives/special.py
from fnad.backends.numpy_ref import bits as _bits  # noqa: E402,F401
from fnad.backends.numpy_ref import special as _special_fns  # noqa: E402,F401
