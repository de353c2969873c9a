"""More of jax.scipy.special: gamma and beta relatives, Bessel I₀/I₁, Hurwitz zeta,
entropies, Box-Cox, Pochhammer, erfcx, Dawson, Spence, Bernoulli numbers, exponential
integrals. Re-exported by fnad/scipy/special.py.

Composed from fnad.lax (lgamma, digamma, betainc, zeta, bessel_i0e/i1e, ...) and
fnad.numpy; values, special points and derivatives follow jax 0.10's:

    gammasgn(x) = sign Γ(x): NaN at 0 > x ∈ ℤ, -inf and NaN; ±1 at ±0
    gamma(x)    = gammasgn(x)·exp(lgamma x)        (real x)
    loggamma(x) = lgamma(x) for x > 0, NaN else    (real x)
    beta(a, b)  = sign·exp(betaln(a, b)),  factorial(n) = Γ(n + 1) (0 for n < 0)
    comb(N, k)  = exp(lgamma(N+1) - lgamma(k+1) - lgamma(N-k+1)) for 0 <= k <= N, else 0
    i0(x) = e^|x|·i0e(x),  i1(x) = e^|x|·i1e(x)
    zeta(x, q)  = lax.zeta, derivatives (in x and q) those of Johansson's Euler-Maclaurin
                  series (jax's custom JVP): S + I + T with N = M = 8 (float32) or 16
    rel_entr(p, q) = p·log(p/q) (p, q > 0), 0 (p = 0 <= q), inf else; kl_div = rel_entr - p + q
    boxcox(x, λ) = (x^λ - 1)/λ, log x at λ = 0;   boxcox1p likewise with 1 + x
    poch(z, m)  = Γ(z + m)/Γ(z) (1 at m = 0); d/dz = (ψ(z+m) - ψ(z))·poch, d/dm = ψ(z+m)·poch
    erfcx(x)    = e^(x²)·erfc(x), an asymptotic series where e^(x²) overflows;
                  JVP (2x·erfcx(x) - 2/√π)·dx
    dawsn(x)    = e^(-x²)∫₀ˣ e^(t²) dt (Cody et al.'s rational approximations); JVP (1 - 2x·F)·dx
    spence(x)   = ∫₁ˣ log t/(1 - t) dt (Cephes), NaN for x < 0
    bernoulli(n) = B₀ ... Bₙ (Chowla and Hartung), float
"""
from __future__ import annotations

import math
import operator

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax
from fnad.custom import custom_jvp
from fnad.numpy._core import asarray, promote_args_inexact

__all__ = ["bernoulli", "beta", "betainc", "boxcox", "boxcox1p", "comb", "dawsn", "erfcx",
           "factorial", "gamma", "gammasgn", "i0", "i0e", "i1", "i1e", "kl_div", "loggamma",
           "poch", "rel_entr", "spence", "zeta"]


def _real(name, *args):
    args = tuple(asarray(a) for a in promote_args_inexact(name, *args))
    if np.issubdtype(args[0].dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return args


def _c(x, v):
    """The constant v in x's dtype (a NumPy scalar: no promotion)."""
    return np.asarray(v, x.dtype)


# ---- gamma and beta --------------------------------------------------------------------------
def gammasgn(x):
    """The sign of Γ(x): NaN at 0 > x ∈ ℤ, at -inf and NaN; -1 at -0."""
    (x,) = _real("gammasgn", x)
    floor_x = lax.floor(x)
    negative = jnp.less(x, 0)
    undefined = (negative & jnp.equal(x, floor_x)) | jnp.isnan(x)
    minus = (negative & jnp.not_equal(jnp.remainder(floor_x, 2), 0)) | \
        (jnp.equal(x, 0) & jnp.signbit(x))
    return jnp.where(undefined, _c(x, np.nan), jnp.where(minus, _c(x, -1.0), _c(x, 1.0)))


def gamma(x):
    """Γ(x) = gammasgn(x)·exp(lgamma(x)) (real x; complex is not supported)."""
    (x,) = _real("gamma", x)
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def loggamma(x):
    """log Γ(x) for x > 0 (NaN elsewhere; real x: jax's complex branch is not ported)."""
    (x,) = _real("loggamma", x)
    return jnp.where(jnp.greater(x, 0), lax.lgamma(x), _c(x, np.nan))


def beta(a, b):
    """B(a, b) = Γ(a)Γ(b)/Γ(a + b), with its sign."""
    from fnad.scipy.special import betaln
    a, b = _real("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(betaln(a, b))


def betainc(a, b, x):
    """I_x(a, b), the regularized incomplete beta function (lax.betainc): differentiable in
    x only (an error in a and b, as in jax)."""
    a, b, x = _real("betainc", a, b, x)
    return lax.betainc(*jnp.broadcast_arrays(a, b, x))


def factorial(n, exact: bool = False):
    """n! = Γ(n + 1) as a float; 0 for n < 0. exact=True is not supported (as in jax)."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    (n,) = (asarray(a) for a in promote_args_inexact("factorial", n))
    return jnp.where(jnp.less(n, 0), _c(n, 0.0), lax.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition: bool = False):
    """The binomial coefficient C(N, k) as a float (0 outside 0 <= k <= N); with repetition,
    C(N + k - 1, k) (1 at k = 0 for N >= 0)."""
    N, k = (asarray(a) for a in promote_args_inexact("comb", N, k))
    if repetition:
        at_zero = jnp.equal(k, 0) & jnp.greater_equal(N, 0)
        return jnp.where(at_zero, _c(N, 1.0), comb(N + k - 1, k))
    ok = jnp.less_equal(k, N) & jnp.greater_equal(N, 0) & jnp.greater_equal(k, 0)
    safe_N, safe_k = jnp.where(ok, N, _c(N, 0.0)), jnp.where(ok, k, _c(N, 0.0))
    out = lax.exp(lax.lgamma(safe_N + 1) - lax.lgamma(safe_k + 1) -
                  lax.lgamma(safe_N + 1 - safe_k))
    return jnp.where(ok, out, _c(N, 0.0))


def poch(z, m):
    """The rising factorial (z)ₘ = Γ(z + m)/Γ(z); 1 at m = 0."""
    z, m = _real("poch", z, m)
    return _poch(z, m)


@custom_jvp
def _poch(z, m):
    return jnp.where(jnp.equal(m, 0), _c(z, 1.0), gamma(z + m) / gamma(z))


_poch.defjvps(                                         # jax's rules
    lambda z_dot, out, z, m: (lax.digamma(z + m) - lax.digamma(z)) * _poch(z, m) * z_dot,
    lambda m_dot, out, z, m: lax.digamma(z + m) * _poch(z, m) * m_dot)


# ---- Bessel I₀, I₁ ---------------------------------------------------------------------------
def i0e(x):
    """e^(-|x|)·I₀(x)."""
    return lax.bessel_i0e(_real("i0e", x)[0])


def i0(x):
    """I₀(x), the modified Bessel function of the first kind of order 0."""
    (x,) = _real("i0", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i0e(x)


def i1e(x):
    """e^(-|x|)·I₁(x)."""
    return lax.bessel_i1e(_real("i1e", x)[0])


def i1(x):
    """I₁(x), the modified Bessel function of the first kind of order 1."""
    (x,) = _real("i1", x)
    return lax.exp(lax.abs(x)) * lax.bessel_i1e(x)


# ---- Hurwitz zeta ----------------------------------------------------------------------------
# (2k)!/B_2k for k = 1 ... 16, B the Bernoulli numbers (the Euler-Maclaurin coefficients)
_BERNOULLI_COEFS = np.array([
    12, -720, 30240, -1209600, 47900160, -1307674368000 / 691, 74724249600,
    -10670622842880000 / 3617, 5109094217170944000 / 43867, -802857662698291200000 / 174611,
    14101100039391805440000 / 77683, -1693824136731743669452800000 / 236364091,
    186134520519971831808000000 / 657931,
    -37893265687455865519472640000000 / 3392780147,
    759790291646040068357842010112000000 / 1723168255201,
    -134196726836183700385281186201600000000 / 7709321041217])


def zeta(x, q=None):
    """The Hurwitz zeta function ζ(x, q) = Σ_{k>=0} (k + q)^(-x) (lax.zeta); q is required
    (the Riemann zeta function is not implemented, as in jax)."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = _real("zeta", x, q)
    return _zeta(*jnp.broadcast_arrays(x, q))


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


def _zeta_series(s, a):
    """Johansson's Euler-Maclaurin formula (5), arXiv:1309.2877: ζ(s, a) = S + I + T with
    S = Σ_{k<N} (a + k)^(-s), I = (a + N)^(1-s)/(s - 1),
    T = (a + N)^(-s)·(1/2 + Σ_{j<M} B_2j/(2j)!·(s)_{2j-1}/(a + N)^(2j-1))."""
    n = m = 8 if s.dtype == np.float32 else 16
    s_, a_ = s[..., None], a[..., None]                                      # [..., 1]
    k = np.arange(n, dtype=s.dtype)
    S = jnp.sum((a_ + k) ** -s_, -1)                                         # [..., N] -> [...]
    one = _c(s, 1.0)
    I = lax.div((a + _c(a, n)) ** (one - s), s - one)  # noqa: E741  (the paper's name)
    T0 = (a + _c(a, n)) ** -s
    j = np.arange(2 * m, dtype=s.dtype)
    T1 = jnp.cumprod((s_ + j) / (a_ + _c(a, n)), -1)[..., ::2]               # [..., M]
    T1 = jnp.clip(T1, max=_c(s, np.finfo(s.dtype).max))
    T1 = T1 / _BERNOULLI_COEFS[:m].astype(s.dtype)
    return S + I + T0 * (_c(s, 0.5) + jnp.sum(T1, -1))


@_zeta.defjvp
def _zeta_jvp(primals, tangents):                      # the series' derivatives (jax's rule)
    return fnad.jvp(_zeta_series, primals, tangents)


# ---- relative entropy, Box-Cox ---------------------------------------------------------------
def rel_entr(p, q):
    """p·log(p/q) for p, q > 0; 0 for p = 0 <= q; inf otherwise."""
    from fnad.scipy.special import _xlogx, xlogy
    p, q = _real("rel_entr", p, q)
    both_positive = jnp.greater(p, 0) & jnp.greater(q, 0)
    p_zero = jnp.equal(p, 0) & jnp.greater_equal(q, 0)
    safe_p, safe_q = jnp.where(both_positive, p, _c(p, 1.0)), jnp.where(both_positive, q,
                                                                         _c(p, 1.0))
    val = _xlogx(safe_p) - xlogy(safe_p, safe_q)
    return jnp.where(both_positive, val, jnp.where(p_zero, _c(p, 0.0), _c(p, np.inf)))


def kl_div(p, q):
    """p·log(p/q) - p + q (elementwise; scipy's kl_div)."""
    p, q = _real("kl_div", p, q)
    return rel_entr(p, q) - p + q


def boxcox(x, lmbda):
    """(x^λ - 1)/λ, log x at λ = 0."""
    x, lmbda = promote_args_inexact("boxcox", x, lmbda)
    return _boxcox(jnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """((1 + x)^λ - 1)/λ, log1p x at λ = 0."""
    x, lmbda = promote_args_inexact("boxcox1p", x, lmbda)
    return _boxcox(jnp.log1p(x), lmbda)


def _boxcox(log_x, lmbda):
    zero = jnp.equal(lmbda, 0)
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


# ---- erfcx, dawsn ----------------------------------------------------------------------------
def erfcx(x):
    """e^(x²)·erfc(x), the scaled complementary error function (real x; jax's complex branch,
    through the Faddeeva function, is not ported)."""
    (x,) = _real("erfcx", x)
    return _erfcx(x)


@custom_jvp
def _erfcx(x):
    if x.dtype == np.float64:                          # the asymptotic series' length: its
        return _erfcx_impl(x, 9)                       # first left-out term is < eps there
    if x.dtype == np.float32:
        return _erfcx_impl(x, 5)
    return _erfcx_impl(x.astype(np.float32), 5).astype(x.dtype)


_erfcx.defjvps(lambda g, ans, x: g * (_c(x, 2.0) * x * ans - _c(x, 2.0 / math.sqrt(math.pi))))


def _erfcx_impl(x, nterms: int):
    # erfcx(x) ~ 1/(√π·x)·Σ_k c_k·x^(-2k), c_k = (-1)^k·(2k-1)!!/2^k, where e^(x²) overflows
    coeffs = [7918.06640625, -1055.7421875, 162.421875, -29.53125, 6.5625, -1.875, .75, -.5,
              1.]
    large = jnp.greater(x, _c(x, math.sqrt(math.log(np.finfo(x.dtype).max))))
    safe_x = jnp.where(large, _c(x, 1.0), x)
    direct = lax.exp(lax.square(safe_x)) * lax.erfc(safe_x)
    t = _c(x, 1.0) / lax.square(x)
    asymptotic = jnp.polyval(np.array(coeffs[-nterms:], x.dtype), t) / \
        (x * _c(x, math.sqrt(math.pi)))
    return jnp.where(large, asymptotic, direct)


# Cody, Paciorek and Thacher (1970): dawsn on [0, 3.25) as ax·P(ax²)/Q(ax²), on [3.25, 6.25)
# and [6.25, inf) as 0.5/ax·(1 + t·P(t)/Q(t)) with t = 1/ax²
_DAWSN_AN = (1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
             9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
             -8.50149846724410912031e-4, 4.22618223005546594270e-2,
             -9.17480371773452345351e-2, 9.99999999999999994612e-1)
_DAWSN_AD = (2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
             1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
             3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
             5.74918629489320327824e-1, 1.00000000000000000539e0)
_DAWSN_BN = (5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
             -2.18711255142039025206e-2, 3.66207612329569181322e-3,
             -4.23209114460388756528e-4, 3.59641304793896631888e-5,
             -2.14640351719968974225e-6, 9.10010780076391431042e-8,
             -2.40274520828250956942e-9, 3.59233385440928410398e-11)
_DAWSN_BD = (1.00000000000000000000e0, -6.31839869873368190192e-1, 2.36706788228248691528e-1,
             -5.31806367003223277662e-2, 8.48041718586295374409e-3,
             -9.47996768486665330168e-4, 7.81025592944552338085e-5,
             -4.55875153252442634831e-6, 1.89100358111421846170e-7,
             -4.91324691331920606875e-9, 7.18466403235734541950e-11)
_DAWSN_CN = (-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
             1.64837047825189632310e-2, -4.86827613020462700845e-4)
_DAWSN_CD = (1.00000000000000000000e0, -2.69820057197544900361e0, 1.73270799045947845857e0,
             -3.93708582281939493482e-1, 3.44278924041233391079e-2,
             -9.73655226040941223894e-4)


def dawsn(x):
    """Dawson's integral F(x) = e^(-x²)·∫₀ˣ e^(t²) dt."""
    (x,) = _real("dawsn", x)
    return _dawsn(x)


@custom_jvp
def _dawsn(x):
    if x.dtype in (np.float32, np.float64):
        return _dawsn_impl(x)
    return _dawsn_impl(x.astype(np.float32)).astype(x.dtype)


_dawsn.defjvps(lambda g, ans, x: g * (_c(x, 1.0) - _c(x, 2.0) * x * ans))


def _dawsn_impl(x):
    ax = lax.abs(x)
    poly = [np.array(c, x.dtype) for c in (_DAWSN_AN, _DAWSN_AD, _DAWSN_BN, _DAWSN_BD,
                                            _DAWSN_CN, _DAWSN_CD)]
    r1 = jnp.less(ax, _c(x, 3.25))
    r3 = jnp.greater_equal(ax, _c(x, 6.25))
    r2 = ~r1 & ~r3
    one = _c(x, 1.0)

    def tail(region, num, den):                        # safe inputs off the region: no inf/inf
        a = jnp.where(region, ax, one)
        t = one / lax.square(a)
        return _c(x, 0.5) / a * (one + t * jnp.polyval(num, t) / jnp.polyval(den, t))
    a1 = jnp.where(r1, ax, one)
    v1 = a1 * jnp.polyval(poly[0], lax.square(a1)) / jnp.polyval(poly[1], lax.square(a1))
    out = jnp.where(r1, v1, jnp.where(r2, tail(r2, poly[2], poly[3]),
                                      tail(r3, poly[4], poly[5])))
    return jnp.sign(x) * out


# ---- Spence's function, Bernoulli numbers ----------------------------------------------------
_SPENCE_A = (4.65128586073990045278E-5, 7.31589045238094711071E-3, 1.33847639578309018650E-1,
             8.79691311754530315341E-1, 2.71149851196553469920E0, 4.25697156008121755724E0,
             3.29771340985225106936E0, 1.00000000000000000126E0)
_SPENCE_B = (6.90990488912553276999E-4, 2.54043763932544379113E-2, 2.82974860602568089943E-1,
             1.41172597751831069617E0, 3.63800533345137075418E0, 5.03278880143316990390E0,
             3.54771340985225096217E0, 9.99999999999999998740E-1)


def spence(x):
    """Spence's function (the dilogarithm Li₂(1 - x)) for float32/float64 x >= 0 (Cephes);
    NaN for x < 0."""
    x = asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported "
                        f"types.")
    one = _c(x, 1.0)
    special = jnp.less(x, 0) | jnp.equal(x, 1) | jnp.equal(x, 0)
    xs = jnp.where(special, _c(x, 0.75), x)            # the special points: set below
    big = jnp.greater(xs, 2)
    xs = jnp.where(big, one / xs, xs)
    above = jnp.greater(xs, 1.5)
    below = jnp.less(xs, 0.5)
    big = big | above
    w = jnp.where(above, one / xs - one, jnp.where(below, -xs, xs - one))
    y = -w * jnp.polyval(np.array(_SPENCE_A, x.dtype), w) / \
        jnp.polyval(np.array(_SPENCE_B, x.dtype), w)
    y = jnp.where(below, _c(x, np.pi ** 2 / 6) - jnp.log(xs) * jnp.log(one - xs) - y, y)
    y = jnp.where(big, _c(x, -0.5) * jnp.log(xs) ** 2 - y, y)
    y = jnp.where(jnp.equal(x, 1), _c(x, 0.0), y)
    y = jnp.where(jnp.equal(x, 0), _c(x, np.pi ** 2 / 6), y)
    return jnp.where(jnp.less(x, 0), _c(x, np.nan), y)


def bernoulli(n: int):
    """The Bernoulli numbers B₀ ... Bₙ ([n + 1], float; B₁ = -1/2), by Chowla and Hartung's
    B_2k = (-1)^(k+1)·2·(2k)!/(2π)^(2k)·ζ(2k), ζ summed to 50 terms."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"Argument n of bernoulli must be a static Python int, got "
                        f"{n!r}") from None
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    b3 = jnp.array([1, -1 / 2, 1 / 6])
    if n < 3:
        return b3[:n + 1]
    bn = jnp.zeros(n + 1, b3.dtype).at[:3].set(b3)
    m = jnp.arange(4, n + 1, 2, dtype=bn.dtype)
    q1 = (1. / np.pi ** 2) * jnp.cumprod(-(m - 1) * m / 4 / np.pi ** 2)
    k = jnp.arange(2, 50, dtype=bn.dtype)              # 2^-50 < 1e-15
    q2 = jnp.sum(k[:, None] ** -m[None, :], axis=0)
    return bn.at[4::2].set(q1 * (1 + q2))
