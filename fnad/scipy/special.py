"""fnad.scipy.special: special functions, as jax.scipy.special.

Composed from fnad.lax primitives (erf, erf_inv, lgamma, digamma, polygamma, igamma,
igammac) and fnad.numpy; imports neither SciPy nor a backend. Numerics and derivatives
follow jax's:

    xlogy(x, y) = x·log(y), 0 where x = 0 (NaN y still gives NaN); custom JVP
                  dx·log(y) + dy·x/y, as jax's (so its values at x = 0 are jax's too)
    xlog1py     likewise with log1p(y)
    entr(x)     = -x·log(x) for x > 0, 0 at 0, -inf for x < 0; JVP -(log x + 1)·dx
    logit(x)    = log(x / (1 - x)); JVP dx / (x(1 - x))
    ndtr(x)     = Φ(x) = (1 + erf(x/√2))/2, through erfc in the tails (|x| > 1)
    ndtri(p)    = Φ⁻¹(p): Cephes' rational approximations (jax's); ±inf at 1 and 0
    log_ndtr(x) = log Φ(x): log(ndtr) in the middle, -ndtr(-x) for large x and an
                  asymptotic series for very negative x; JVP exp(log φ(x) - log Φ(x))·dx
    betaln(a,b) = log|B(a, b)|, as jax's (scipy's algdiv for max(a, b) >= 8)
    multigammaln(a, d) = d(d-1)/4·log π + Σ_{j<d} lgamma(a - j/2)
"""
from __future__ import annotations

import functools

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad import nn as _nn
from fnad.custom import custom_jvp
from fnad.numpy._core import asarray, promote_args_inexact

__all__ = ["betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammainc",
           "gammaincc", "gammaln", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "softmax", "xlog1py", "xlogy"]

logsumexp = _nn.logsumexp                              # the same function, as in jax


def _inexact(name, x):
    return promote_args_inexact(name, x)[0]


# ---- gamma family ----------------------------------------------------------------------------
def gammaln(x):
    """log|Γ(x)| (lax.lgamma): inf at the poles 0, -1, -2, ..."""
    return lax.lgamma(_inexact("gammaln", x))


def digamma(x):
    """ψ(x) = d/dx log Γ(x) (lax.digamma): NaN at the poles."""
    return lax.digamma(_inexact("digamma", x))


def polygamma(n, x):
    """ψ⁽ⁿ⁾(x), the n-th derivative of digamma, for integer n >= 0 (NaN for other n)."""
    if not np.issubdtype(asarray(n).dtype, np.integer):
        raise ValueError("Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{asarray(n).dtype}.")
    n, x = promote_args_inexact("polygamma", n, x)
    if np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("polygamma does not support complex-valued inputs.")
    n, x = jnp.broadcast_arrays(n, x)
    return lax.polygamma(n, x)


def gammainc(a, x):
    """P(a, x) = γ(a, x)/Γ(a), the regularized lower incomplete gamma function (lax.igamma):
    differentiable in x, and in a through lax.igamma_grad_a (first order only: that has no
    derivative, as in jax). NaN for a < 0, x < 0 or a = x = 0."""
    a, x = promote_args_inexact("gammainc", a, x)
    return lax.igamma(*jnp.broadcast_arrays(a, x))


def gammaincc(a, x):
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function (lax.igammac),
    with gammainc's derivatives negated."""
    a, x = promote_args_inexact("gammaincc", a, x)
    return lax.igammac(*jnp.broadcast_arrays(a, x))


def betaln(a, b):
    """log|B(a, b)| = lgamma(a) + lgamma(b) - lgamma(a + b), computed as jax does: for
    b = max(a, b) >= 8 through scipy's algdiv, which keeps large arguments accurate."""
    a, b = promote_args_inexact("betaln", a, b)
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    small_b = jnp.add(lax.lgamma(a), jnp.subtract(lax.lgamma(b), lax.lgamma(jnp.add(a, b))))
    large_b = jnp.add(lax.lgamma(a), _algdiv(a, b))
    return jnp.where(jnp.less(b, 8), small_b, large_b)


def _algdiv(a, b):
    """log Γ(b) - log Γ(a + b) for b >= 8 and a <= b (scipy's cdflib algdiv, via jax)."""
    c = (0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03,
         -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02)
    h = a / b
    x = h / (1 + h)
    d = b + (a - 0.5)
    x2 = x * x                                         # s_n = (1 - x^n) / (1 - x)
    s3 = 1.0 + (x + x2)
    s5 = 1.0 + (x + x2 * s3)
    s7 = 1.0 + (x + x2 * s5)
    s9 = 1.0 + (x + x2 * s7)
    s11 = 1.0 + (x + x2 * s9)
    t = (1.0 / b) ** 2                                 # w = del(b) - del(a + b)
    w = ((((c[5] * s11 * t + c[4] * s9) * t + c[3] * s7) * t + c[2] * s5) * t + c[1] * s3) * t \
        + c[0]
    w = w * (x / b)
    u = d * jnp.log1p(a / b)
    v = a * (jnp.log(b) - 1.0)
    return jnp.where(u <= v, (w - v) - u, (w - u) - v)


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension d (a static int)."""
    d = int(d)                                         # static (a tracer cannot be)
    a, d_ = promote_args_inexact("multigammaln", a, d)
    constant = 0.25 * d_ * (d_ - 1) * np.log(np.pi).astype(a.dtype)
    b = jnp.arange(d, dtype=a.dtype) / 2                                       # [d]
    res = jnp.sum(gammaln(jnp.expand_dims(a, -1) - b), axis=-1)                # [..., d] -> [...]
    return res + constant


# ---- erf family ------------------------------------------------------------------------------
def erf(x):
    """2/√π ∫₀ˣ exp(-t²) dt."""
    return lax.erf(_inexact("erf", x))


def erfc(x):
    """1 - erf(x), accurate where erf(x) is close to 1."""
    return lax.erfc(_inexact("erfc", x))


def erfinv(x):
    """The inverse of erf on (-1, 1); ±inf at ±1."""
    return lax.erf_inv(_inexact("erfinv", x))


# ---- logistic --------------------------------------------------------------------------------
def expit(x):
    """1 / (1 + exp(-x))."""
    return lax.logistic(_inexact("expit", x))


@custom_jvp
def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    x = _inexact("logit", x)
    return lax.log(lax.div(x, lax.sub(1.0, x)))


logit.defjvps(lambda g, ans, x: lax.div(g, lax.mul(x, lax.sub(1.0, x))))


# ---- x·log(y) and entropy --------------------------------------------------------------------
@custom_jvp
def xlogy(x, y):
    """x·log(y), 0 where x = 0 (unless y is NaN)."""
    x, y = promote_args_inexact("xlogy", x, y)
    ok = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(ok, jnp.multiply(x, jnp.log(y)), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):                 # dx·log y + dy·x/y (jax's rule)
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlogy(x, y)
    t = jnp.add(jnp.multiply(x_dot, jnp.log(y)), jnp.true_divide(jnp.multiply(y_dot, x), y))
    return out, t.astype(out.dtype)


@custom_jvp
def xlog1py(x, y):
    """x·log(1 + y), 0 where x = 0 (unless y is NaN)."""
    x, y = promote_args_inexact("xlog1py", x, y)
    ok = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(ok, jnp.multiply(x, jnp.log1p(y)), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):               # dx·log(1+y) + dy·x/(1+y)
    (x, y), (x_dot, y_dot) = primals, tangents
    out = xlog1py(x, y)
    t = jnp.add(jnp.multiply(x_dot, jnp.log1p(y)),
                jnp.true_divide(jnp.multiply(y_dot, x), jnp.add(1, y)))
    return out, t.astype(out.dtype)


@custom_jvp
def _xlogx(x):
    return xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):                 # d(x log x) = (log x + 1) dx
    (x,), (x_dot,) = primals, tangents
    return _xlogx(x), jnp.multiply(x_dot, jnp.add(jnp.log(x), 1))


def entr(x):
    """-x·log(x) for x > 0, 0 at 0, -inf for x < 0 (real x only)."""
    x = _inexact("entr", x)
    if np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("entr does not support complex-valued inputs.")
    return jnp.where(jnp.less(x, 0), jnp.full_like(x, -np.inf), jnp.negative(_xlogx(x)))


# ---- the normal distribution -----------------------------------------------------------------
def _normal_float(name: str, x):
    x = asarray(x)
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"{name}: x.dtype={x.dtype} is not supported, only float32 and "
                        "float64 are")
    return x


def ndtr(x):
    """Φ(x) = ∫_{-∞}^x exp(-t²/2)/√(2π) dt, the standard normal CDF."""
    return _ndtr(_normal_float("ndtr", x))


def _ndtr(x):
    half_sqrt_2 = np.sqrt(np.array(0.5, x.dtype))         # strong: Φ(2.0) is not weak (jax)
    w = jnp.multiply(x, half_sqrt_2)
    z = jnp.abs(w)
    y = jnp.where(jnp.less(z, half_sqrt_2), jnp.add(1.0, lax.erf(w)),
                  jnp.where(jnp.greater(w, 0), jnp.subtract(2.0, lax.erfc(z)), lax.erfc(z)))
    return jnp.multiply(0.5, y)


# Cephes' ndtri coefficients (descending powers): P0/Q0 for p > exp(-2), P1/Q1 for
# z = sqrt(-2 log p) < 8, P2/Q2 for z >= 8.
_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2,
             -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _polyval(coeffs, x):
    """Σ c_i x^(n-i) by Horner's rule, the coefficients rounded to x's dtype."""
    c = np.asarray(coeffs, x.dtype)
    out = jnp.full_like(x, c[0])
    for ci in c[1:]:
        out = jnp.add(jnp.multiply(out, x), ci)
    return out


def ndtri(p):
    """Φ⁻¹(p), the inverse of ndtr: -inf at 0, inf at 1, NaN outside [0, 1]."""
    p = _normal_float("ndtri", p)
    dt = p.dtype.type
    q = jnp.where(jnp.greater(p, dt(-np.expm1(-2.0))), jnp.subtract(1.0, p), p)  # the tail
    q = jnp.where(jnp.equal(q, 0), jnp.full_like(q, 0.5), q)   # 0 gives NaNs below; unused
    w = jnp.subtract(q, 0.5)                           # p > exp(-2): x/√(2π) = w + w³P0/Q0(w²)
    ww = jnp.square(w)
    x_big = jnp.add(w, jnp.multiply(jnp.multiply(w, ww),
                                    jnp.true_divide(_polyval(_NDTRI_P0, ww),
                                                    _polyval(_NDTRI_Q0, ww))))
    x_big = jnp.multiply(x_big, -dt(np.sqrt(2.0 * np.pi)))
    z = jnp.sqrt(jnp.multiply(-2.0, jnp.log(q)))     # else x = z - log(z)/z - P/Q(1/z)/z
    first = jnp.subtract(z, jnp.true_divide(jnp.log(z), z))
    r = jnp.true_divide(1.0, z)
    x_small = jnp.subtract(first, jnp.true_divide(jnp.true_divide(_polyval(_NDTRI_P2, r),
                                                                  _polyval(_NDTRI_Q2, r)), z))
    x_mid = jnp.subtract(first, jnp.true_divide(jnp.true_divide(_polyval(_NDTRI_P1, r),
                                                                _polyval(_NDTRI_Q1, r)), z))
    x = jnp.where(jnp.greater(q, dt(np.exp(-2.0))), x_big,
                  jnp.where(jnp.greater_equal(z, 8.0), x_small, x_mid))
    x = jnp.where(jnp.greater(p, dt(1.0 - np.exp(-2.0))), x, jnp.negative(x))
    return jnp.where(jnp.equal(p, 0), -np.inf, jnp.where(jnp.equal(p, 1), np.inf, x))


# log_ndtr's pieces: log(ndtr(x)) on (lower, upper], -ndtr(-x) above (log(1 - e) ≈ -e),
# the asymptotic series below (where ndtr underflows)
_LOG_NDTR_BOUNDS = {np.dtype(np.float32): (-10.0, 5.0), np.dtype(np.float64): (-20.0, 8.0)}


def log_ndtr(x, series_order: int = 3):
    """log Φ(x), accurate far into both tails (float32 and float64).

    For x <= lower (-10 in float32, -20 in float64) the asymptotic series
    log Φ(x) = -x²/2 - log(-x) - log(2π)/2 + log(1 + Σ_{n=1}^{N} (-1)^n (2n-1)!! / x^(2n))
    with N = series_order (0 to 30) terms.
    """
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = asarray(x)
    if x.dtype not in _LOG_NDTR_BOUNDS:
        raise TypeError(f"log_ndtr: x.dtype={x.dtype} is not supported, only float32 and "
                        "float64 are")
    return _log_ndtr(x, series_order)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _log_ndtr(x, series_order: int):
    lower, upper = _LOG_NDTR_BOUNDS[x.dtype]
    above = jnp.greater(x, upper)
    # one ndtr for both pieces; max(x, lower) keeps the unchosen log finite (and its
    # gradient: 0·inf would be NaN)
    res = _ndtr(jnp.where(above, jnp.negative(x), jnp.maximum(x, lower)))
    return jnp.where(above, jnp.negative(res),
                     jnp.where(jnp.greater(x, lower), jnp.log(res),
                               _log_ndtr_lower(jnp.minimum(x, lower), series_order)))


@_log_ndtr.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):  # d log Φ = φ(x)/Φ(x) dx
    (x,), (x_dot,) = primals, tangents
    out = _log_ndtr(x, series_order)
    return out, jnp.multiply(x_dot, jnp.exp(jnp.subtract(_norm_logpdf(x), out)))


def _log_ndtr_lower(x, series_order: int):
    x2 = jnp.square(x)
    log_scale = jnp.subtract(jnp.subtract(jnp.multiply(-0.5, x2), jnp.log(jnp.negative(x))),
                             0.5 * np.log(2.0 * np.pi))
    return jnp.add(log_scale, jnp.log(_log_ndtr_series(x, series_order)))


def _log_ndtr_series(x, series_order: int):
    if series_order <= 0:
        return jnp.ones_like(x)
    x2 = jnp.square(x)
    even, odd = jnp.zeros_like(x), jnp.zeros_like(x)
    x2n = x2
    for n in range(1, series_order + 1):
        term = jnp.true_divide(float(np.prod(np.arange(2 * n - 1, 1, -2))), x2n)  # (2n-1)!!
        if n % 2:
            odd = jnp.add(odd, term)
        else:
            even = jnp.add(even, term)
        x2n = jnp.multiply(x2n, x2)
    return jnp.subtract(jnp.add(1.0, even), odd)


def _norm_logpdf(x):
    return jnp.subtract(jnp.multiply(-0.5, jnp.square(x)), float(np.log(np.sqrt(2 * np.pi))))


# ---- softmax, as scipy's: over every axis by default -----------------------------------------
def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (all axes by default, as scipy.special.softmax)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over `axis` (all axes by default)."""
    return _nn.log_softmax(x, axis=axis)


# ---- more of jax.scipy.special (fnad/scipy/_special_more.py) --------------------------------
from fnad.scipy._special_more import (  # noqa: E402
    bernoulli,
    beta,
    betainc,
    boxcox,
    boxcox1p,
    comb,
    dawsn,
    erfcx,
    factorial,
    gamma,
    gammasgn,
    i0,
    i0e,
    i1,
    i1e,
    kl_div,
    loggamma,
    poch,
    rel_entr,
    spence,
    zeta,
)

from fnad.scipy._expint import exp1, expi, expn  # noqa: E402

__all__ += ["exp1", "expi", "expn"]
__all__ += ["bernoulli", "beta", "betainc", "boxcox", "boxcox1p", "comb", "dawsn", "erfcx",
            "factorial", "gamma", "gammasgn", "i0", "i0e", "i1", "i1e", "kl_div", "loggamma",
            "poch", "rel_entr", "spence", "zeta"]

from fnad.scipy._hypergeometric import hyp1f1, hyp2f1  # noqa: E402
from fnad.scipy._special_more2 import (  # noqa: E402
    bessel_jn,
    fresnel,
    owens_t,
    sici,
    sph_harm_y,
    wofz,
)

__all__ += ["bessel_jn", "fresnel", "hyp1f1", "hyp2f1", "owens_t", "sici", "sph_harm_y", "wofz"]
