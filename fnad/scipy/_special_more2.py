"""Still more of jax.scipy.special: the Faddeeva function, Fresnel and sine/cosine integrals,
Owen's T, Bessel Jₙ of integer order and spherical harmonics (the hypergeometric functions
are in _hypergeometric.py). Re-exported by fnad/scipy/special.py.

Composed from fnad.lax and fnad.numpy (so each traces, jits, vmaps and differentiates):

    wofz(z)      = e^(-z²)·erfc(-iz): Weideman's (1994) rational series with N = 32 (its
                   coefficients computed here by his FFT recipe), reflected into Im z < 0 by
                   w(z) = 2e^(-z²) - w(-z); JVP (-2z·w + 2i/√π)·dz (jax's)
    fresnel(x)   = (∫₀ˣ sin(πt²/2) dt, ∫₀ˣ cos(πt²/2) dt): Cephes' rational approximations;
                   JVP (sin(πx²/2), cos(πx²/2))·dx
    sici(x)      = (∫₀ˣ sin t/t dt, γ + log|x| + ∫₀^|x| (cos t - 1)/t dt): Cephes';
                   JVP (sin x/x, cos x/x)·dx
    owens_t(h, a) = 1/(2π)·∫₀ᵃ e^(-h²(1+u²)/2)/(1+u²) du: 20-point Gauss-Legendre on
                   [0, min(|a|, 9/|h|)] for |a| <= 1, the reciprocal identity for |a| > 1;
                   JVP in h and a the integrand's (jax's)
    bessel_jn(z, v=) = J₀(z) ... J_v(z): Miller's backward recurrence from n_iter (jax's,
                   differentiated through the recurrence as jax does)
    sph_harm_y(n, m, θ, φ) = Yₙᵐ(θ, φ), with the normalized associated Legendre recurrence
"""
from __future__ import annotations

import math
import operator

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.custom import custom_jvp
from fnad.numpy._core import asarray, promote_args_inexact, promote_dtypes_inexact

__all__ = ["bessel_jn", "fresnel", "owens_t", "sici", "sph_harm_y", "wofz"]

_SQRT_PI = math.sqrt(math.pi)


def _c(x, v):
    """The constant v in x's dtype (a NumPy scalar: no promotion)."""
    return np.asarray(v, x.dtype)


def _real(name, *args):
    args = tuple(asarray(a) for a in promote_args_inexact(name, *args))
    if np.issubdtype(args[0].dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs; got dtype "
                         f"{args[0].dtype}.")
    return args


def _upcast_half(f):
    """Run f in float32 for 16-bit float inputs (the coefficients need float32's range)."""
    def run(*args):
        dtype = args[0].dtype
        if dtype in (np.float32, np.float64):
            return f(*args)
        out = f(*(a.astype(np.float32) for a in args))
        if isinstance(out, tuple):
            return tuple(o.astype(dtype) for o in out)
        return out.astype(dtype)
    return run


def _masked_loop(active_fn, body, state, max_iter):
    """Iterate `body` on the entries where `active_fn(state)` holds (each stops on its own)
    until none does or max_iter steps ran. state[0] is the step count (an array)."""
    def cond(s):
        return jnp.any(active_fn(s) & jnp.less(s[0], max_iter))

    def step(s):
        on = active_fn(s) & jnp.less(s[0], max_iter)
        new = body(s)
        return tuple(jnp.where(on, b, a) for a, b in zip(s, new))
    return lax.while_loop(cond, step, state)


# ---- wofz ------------------------------------------------------------------------------------
def _weideman_coefficients(n: int = 32):
    """Weideman (1994), SIAM J. Numer. Anal. 31: the coefficients a_n of
    w(z) = 2·Σ a_n Zⁿ/(L - iz)² + 1/(√π(L - iz)), Z = (L + iz)/(L - iz), highest power first."""
    m = 2 * n
    L = math.sqrt(n / math.sqrt(2))
    k = np.arange(-m + 1, m)
    t = L * np.tan(k * np.pi / (2 * m))
    f = np.concatenate([[0.0], np.exp(-t * t) * (L * L + t * t)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return L, a[1:n + 1][::-1].copy()


_WOFZ_L, _WOFZ_A = _weideman_coefficients()


def wofz(z):
    """The Faddeeva function w(z) = e^(-z²)·erfc(-iz) (complex result: complex64 for float32
    or complex64 input, complex128 for float64 or complex128). Differentiable in z
    (holomorphic: d w = (-2z·w + 2i/√π) dz). ~1e-13 relative in float64 (Weideman's N = 32
    series, as jax); overflows as e^(-z²) does deep in the lower half plane."""
    (z,) = (asarray(a) for a in promote_args_inexact("wofz", z))
    if not np.issubdtype(z.dtype, np.complexfloating):
        z = z.astype(np.complex128 if z.dtype == np.float64 else np.complex64)
    return _wofz(z)


def _wofz_upper(z):                                    # Im z >= 0
    L = _c(z, _WOFZ_L)
    iz = z * _c(z, 1j)
    den = L - iz
    Z = (L + iz) / den
    p = jnp.polyval(_WOFZ_A.astype(z.dtype), Z)
    return _c(z, 2.0) * p / (den * den) + _c(z, 1 / _SQRT_PI) / den


@custom_jvp
def _wofz(z):
    upper = jnp.greater_equal(lax.imag(z), 0)
    zu = jnp.where(upper, z, -z)
    wu = _wofz_upper(zu)
    out = jnp.where(upper, wu, _c(z, 2.0) * jnp.exp(-z * z) - wu)
    return jnp.where(jnp.isinf(lax.real(z)) & jnp.equal(lax.imag(z), 0), _c(z, 0.0), out)


_wofz.defjvps(lambda g, ans, z: g * (_c(z, -2.0) * z * ans + _c(z, 2j / _SQRT_PI)))


# ---- fresnel ---------------------------------------------------------------------------------
# Cephes fresnl.c (double precision): S, C = x³·SN/SD(x⁴), x·CN/CD(x⁴) for x² < 2.5625; else
# with the auxiliary f = 1 - u·FN/FD(u), g = t·GN/GD(u), t = 1/(πx²), u = t²
_FRESNEL_SN = (-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7,
               2.54890880573376359104e9, -4.42979518059697779103e10, 3.18016297876567817986e11)
_FRESNEL_SD = (1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
               4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11)
_FRESNEL_CN = (-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
               1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1)
_FRESNEL_CD = (3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
               1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
               1.00000000000000000118e0)
_FRESNEL_FN = (4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2,
               3.45017939782574027900e-4, 4.63613749287867322088e-6, 3.05568983790257605827e-8,
               1.02304514164907233465e-10, 1.72010743268161828879e-13,
               1.34283276233062758925e-16, 3.76329711269987889006e-20)
_FRESNEL_FD = (1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1,
               6.44051526508858611005e-3, 1.55934409164153020873e-4, 1.84627567348930545870e-6,
               1.12699224763999035261e-8, 3.60140029589371370404e-11,
               5.88754533621578410010e-14, 4.52001434074129701496e-17,
               1.25443237090011264384e-20)
_FRESNEL_GN = (5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2,
               6.84079380915393090172e-4, 1.15138826111884280931e-5, 9.82852443688422223854e-8,
               4.45344415861750144738e-10, 1.08268041139020870318e-12,
               1.37555460633261799868e-15, 8.36354435630677421531e-19,
               1.86958710162783235106e-22)
_FRESNEL_GD = (1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1,
               2.53603741420338795122e-2, 8.14679107184306179049e-4, 1.27545075667729118702e-5,
               1.04314589657571990585e-7, 4.60680728146520428211e-10,
               1.10273215066240270757e-12, 1.38796531259578871258e-15,
               8.39158816283118707363e-19, 1.86958710162783236342e-22)


def _ratio(num, den, t):
    return jnp.polyval(np.array(num, t.dtype), t) / jnp.polyval(np.array(den, t.dtype), t)


def _sin_cos_half_pi_square(x):
    """sin(πx²/2), cos(πx²/2) with the phase reduced mod 2 before the multiplication by π:
    x = y + s, y even, s = x mod 2, gives x²/2 ≡ s·(x - s/2) (mod 2)."""
    x = lax.abs(x)
    s = jnp.fmod(x, _c(x, 2.0))
    r = jnp.fmod(s * (x - s / _c(x, 2.0)), _c(x, 2.0))
    return jnp.sin(_c(x, np.pi) * r), jnp.cos(_c(x, np.pi) * r)


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)) = (∫₀ˣ sin(πt²/2) dt, ∫₀ˣ cos(πt²/2) dt) (real x;
    16-bit floats are computed in float32). Differentiable in x. Cephes' double-precision
    approximations in every dtype (jax uses Cephes' float32 ones in float32, and returns
    exactly 0.5 for x > 36974 there, where these keep the ±1/(πx) term)."""
    (x,) = _real("fresnel", x)
    return _fresnel(x)


@custom_jvp
def _fresnel(x):
    return _upcast_half(_fresnel_impl)(x)


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):                   # d(S, C) = (sin, cos)(πx²/2) dx
    (x,), (x_dot,) = (asarray(p) for p in primals), tangents
    sn, cs = _upcast_half(_sin_cos_half_pi_square)(x)
    return _fresnel(x), (sn * x_dot, cs * x_dot)


def _fresnel_impl(x):
    one, half = _c(x, 1.0), _c(x, 0.5)
    ax = lax.abs(x)
    small = jnp.less(ax * ax, _c(x, 2.5625))
    large = jnp.greater(ax, _c(x, 36974.0))
    xs = jnp.where(small, ax, one)                     # safe inputs off each region
    t = xs ** 4
    s_small = xs ** 3 * _ratio(_FRESNEL_SN, _FRESNEL_SD, t)
    c_small = xs * _ratio(_FRESNEL_CN, _FRESNEL_CD, t)
    xl = jnp.where(small | jnp.isinf(ax), _c(x, 2.0), ax)
    sn, cs = _sin_cos_half_pi_square(xl)
    t = one / (_c(x, np.pi) * xl * xl)
    u = t * t
    f = jnp.where(large, one, one - u * _ratio(_FRESNEL_FN, _FRESNEL_FD, u))
    g = jnp.where(large, _c(x, 0.0), t * _ratio(_FRESNEL_GN, _FRESNEL_GD, u))
    pix = _c(x, np.pi) * xl
    s_other = half - (f * cs + g * sn) / pix
    c_other = half + (f * sn - g * cs) / pix
    s = jnp.where(small, s_small, jnp.where(jnp.isinf(ax), half, s_other))
    c = jnp.where(small, c_small, jnp.where(jnp.isinf(ax), half, c_other))
    neg = jnp.less(x, 0)
    s, c = jnp.where(neg, -s, s), jnp.where(neg, -c, c)
    nan = jnp.isnan(x)
    return jnp.where(nan, x, s), jnp.where(nan, x, c)


# ---- sici ------------------------------------------------------------------------------------
# Cephes sici.c: x <= 4 rational series in x²; 4 < x <= 1e9 the auxiliary f, g in 1/x²
# (two fits, split at 8); beyond, Si = π/2 - cos x/x, Ci = sin x/x
_SICI_SN = (-8.39167827910303881427e-11, 4.62591714427012837309e-8, -9.75759303843632795789e-6,
            9.76945438170435310816e-4, -4.13470316229406538752e-2, 1.00000000000000000302e0)
_SICI_SD = (2.03269266195951942049e-12, 1.27997891179943299903e-9, 4.41827842801218905784e-7,
            9.96412122043875552487e-5, 1.42085239326149893930e-2, 9.99999999999999996984e-1)
_SICI_CN = (2.02524002389102268789e-11, -1.35249504915790756375e-8, 3.59325051419993077021e-6,
            -4.74007206873407909465e-4, 2.89159652607555242092e-2, -1.00000000000000000080e0)
_SICI_CD = (4.07746040061880559506e-12, 3.06780997581887812692e-9, 1.23210355685883423679e-6,
            3.17442024775032769882e-4, 5.10028056236446052392e-2, 4.00000000000000000080e0)
_SICI_FN4 = (4.23612862892216586994e0, 5.45937717161812843388e0, 1.62083287701538329132e0,
             1.67006611831323023771e-1, 6.81020132472518137426e-3, 1.08936580650328664411e-4,
             5.48900223421373614008e-7)
_SICI_FD4 = (1.0, 8.16496634205391016773e0, 7.30828822505564552187e0, 1.86792257950184183883e0,
             1.78792052963149907262e-1, 7.01710668322789753610e-3, 1.10034357153915731354e-4,
             5.48900252756255700982e-7)
_SICI_GN4 = (8.71001698973114191777e-2, 6.11379109952219284151e-1, 3.97180296392337498885e-1,
             7.48527737628469092119e-2, 5.38868681462177273157e-3, 1.61999794598934024525e-4,
             1.97963874140963632189e-6, 7.82579040744090311069e-9)
_SICI_GD4 = (1.0, 1.64402202413355338886e0, 6.66296701268987968381e-1, 9.88771761277688796203e-2,
             6.22396345441768420760e-3, 1.73221081474177119497e-4, 2.02659182086343991969e-6,
             7.82579218933534490868e-9)
_SICI_FN8 = (4.55880873470465315206e-1, 7.13715274100146711374e-1, 1.60300158222319456320e-1,
             1.16064229408124407915e-2, 3.49556442447859055605e-4, 4.86215430826454749482e-6,
             3.20092790091004902806e-8, 9.41779576128512936592e-11, 9.70507110881952024631e-14)
_SICI_FD8 = (1.0, 9.17463611873684053703e-1, 1.78685545332074536321e-1,
             1.22253594771971293032e-2, 3.58696481881851580297e-4, 4.92435064317881464393e-6,
             3.21956939101046018377e-8, 9.43720590350276732376e-11, 9.70507110881952025725e-14)
_SICI_GN8 = (6.97359953443276214934e-1, 3.30410979305632063225e-1, 3.84878767649974295920e-2,
             1.71718239052347903558e-3, 3.48941165502279436777e-5, 3.47131167084116673800e-7,
             1.70404452782044526189e-9, 3.85945925430276600453e-12, 3.14040098946363334640e-15)
_SICI_GD8 = (1.0, 1.68548898811011640017e0, 4.87852258695304967486e-1,
             4.67913194259625806320e-2, 1.90284426674399523638e-3, 3.68475504442561108162e-5,
             3.57043223443740838771e-7, 1.72693748966316146736e-9, 3.87830166023954706752e-12,
             3.14040098946363335242e-15)


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)) (real x; Ci(x) = Ci(|x|), the real part,
    for x < 0, as scipy and jax; Si(0) = 0, Ci(0) = -inf, Ci(-inf) = NaN). Differentiable in
    x: d(Si, Ci) = (sin x/x, cos x/x) dx (1 at x = 0 for Si)."""
    (x,) = _real("sici", x)
    return _sici(x)


@custom_jvp
def _sici(x):
    return _upcast_half(_sici_impl)(x)


@_sici.defjvp
def _sici_jvp(primals, tangents):                      # d(Si, Ci) = (sin x, cos x)/x dx
    (x,), (x_dot,) = (asarray(p) for p in primals), tangents
    zero = jnp.equal(x, 0)
    safe = jnp.where(zero, jnp.ones_like(x), x)
    d_si = jnp.where(zero, jnp.ones_like(x), jnp.sin(safe) / safe)
    return _sici(x), (d_si * x_dot, jnp.cos(x) / x * x_dot)


def _sici_impl(x):
    one = _c(x, 1.0)
    ax = lax.abs(x)
    small = jnp.less_equal(ax, 4)
    huge = jnp.greater(ax, 1e9)
    xs = jnp.where(small & jnp.greater(ax, 0), ax, one)
    t = xs * xs
    si_small = xs * _ratio(_SICI_SN, _SICI_SD, t)
    ci_small = _c(x, np.euler_gamma) + jnp.log(xs) + t * _ratio(_SICI_CN, _SICI_CD, t)
    si_small = jnp.where(jnp.equal(ax, 0), _c(x, 0.0), si_small)
    ci_small = jnp.where(jnp.equal(ax, 0), _c(x, -np.inf), ci_small)
    xm = jnp.where(small | huge, _c(x, 5.0), ax)
    z = one / (xm * xm)
    below8 = jnp.less(xm, 8)
    f = jnp.where(below8, _ratio(_SICI_FN4, _SICI_FD4, z), _ratio(_SICI_FN8, _SICI_FD8, z)) / xm
    g = z * jnp.where(below8, _ratio(_SICI_GN4, _SICI_GD4, z), _ratio(_SICI_GN8, _SICI_GD8, z))
    sn, cs = jnp.sin(xm), jnp.cos(xm)
    si_mid, ci_mid = _c(x, np.pi / 2) - f * cs - g * sn, f * sn - g * cs
    xh = jnp.where(huge & ~jnp.isinf(ax), ax, _c(x, 2e9))
    si_huge = jnp.where(jnp.isinf(ax), _c(x, np.pi / 2), _c(x, np.pi / 2) - jnp.cos(xh) / xh)
    ci_huge = jnp.where(jnp.isinf(ax), _c(x, 0.0), jnp.sin(xh) / xh)
    si = jnp.where(small, si_small, jnp.where(huge, si_huge, si_mid))
    ci = jnp.where(small, ci_small, jnp.where(huge, ci_huge, ci_mid))
    si = jnp.where(jnp.less(x, 0), -si, si)
    ci = jnp.where(jnp.isneginf(x), _c(x, np.nan), ci)
    nan = jnp.isnan(x)
    return jnp.where(nan, x, si), jnp.where(nan, x, ci)


# ---- owens_t ---------------------------------------------------------------------------------
_GL_T, _GL_W = np.polynomial.legendre.leggauss(20)
_GL_T, _GL_W = (_GL_T + 1) / 2, _GL_W / 2              # on [0, 1]


def owens_t(h, a):
    """Owen's T function T(h, a) = 1/(2π)·∫₀ᵃ e^(-h²(1+u²)/2)/(1+u²) du (real h, a).
    Differentiable in h and a: dT/dh = -φ(h)·erf(ah/√2)/2, dT/da = e^(-h²(1+a²)/2)/(2π(1+a²)).
    ~1e-13 relative in float64 (jax's 13-point rule loses up to ~1e-9 at large h)."""
    h, a = _real("owens_t", h, a)
    return _owens_t(*jnp.broadcast_arrays(h, a))


def _owens_t_small_a(h, a):
    """T(h, a) for h >= 0, 0 <= a <= 1: e^(-h²/2)/(2π)·∫₀^b e^(-h²u²/2)/(1+u²) du, b the
    smaller of a and 9/h (the integrand is below e^-40 of its peak beyond)."""
    b = jnp.minimum(a, _c(h, 9.0) / jnp.maximum(h, _c(h, 1e-30)))
    u = b[..., None] * _GL_T.astype(h.dtype)                               # [..., 20]
    f = jnp.exp(-_c(h, 0.5) * lax.square(h[..., None] * u)) / (_c(h, 1.0) + u * u)
    integral = b * jnp.sum(f * _GL_W.astype(h.dtype), -1)                   # [..., 20] -> [...]
    return jnp.exp(-_c(h, 0.5) * h * h) / _c(h, 2 * np.pi) * integral


@custom_jvp
def _owens_t(h, a):
    return _upcast_half(_owens_t_impl)(h, a)


def _owens_t_impl(h, a):
    ah, aa = lax.abs(h), lax.abs(a)
    one, quarter = _c(h, 1.0), _c(h, 0.25)
    big = jnp.greater(aa, 1)
    inv = jnp.where(big, one / jnp.where(big, aa, one), aa)
    t = _owens_t_small_a(jnp.where(big, aa * ah, ah), inv)
    # |a| > 1: T(h, a) = ¼ - ¼·erf(h/√2)·erf(ah/√2) - T(ah, 1/a), or in tail probabilities
    # (no cancellation at large h) ½Q(h) + ½Q(ah) - Q(h)Q(ah) - T(ah, 1/a)
    r2 = _c(h, math.sqrt(2.0))
    e1, e2 = lax.erfc(ah / r2), lax.erfc(aa * ah / r2)
    near = quarter - quarter * lax.erf(ah / r2) * lax.erf(aa * ah / r2)
    far = quarter * (e1 + e2 - e1 * e2)
    t = jnp.where(big, jnp.where(jnp.less_equal(aa * ah, 0.67), near, far) - t, t)
    t = jnp.where(jnp.isinf(aa), quarter * e1, t)      # the a -> ∞ limit, ½Q(|h|)
    t = jnp.where(jnp.isinf(ah), _c(h, 0.0), t)
    out = jnp.sign(a) * t
    return jnp.where(jnp.isnan(h) | jnp.isnan(a), _c(h, np.nan), out)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):                   # the integrand's derivatives (jax's)
    (h, a), (h_dot, a_dot) = (asarray(p) for p in primals), tangents
    half = _c(h, 0.5)
    dh = -jnp.exp(-half * h * h) * lax.erf(a * h / _c(h, math.sqrt(2))) / \
        _c(h, 2 * math.sqrt(2 * math.pi))
    one_plus_a2 = _c(h, 1.0) + a * a
    da = jnp.exp(-half * one_plus_a2 * h * h) / (_c(h, 2 * np.pi) * one_plus_a2)
    return _owens_t(h, a), dh * h_dot + da * a_dot


# ---- bessel_jn -------------------------------------------------------------------------------
def bessel_jn(z, *, v: int, n_iter: int = 50):
    """J₀(z) ... J_v(z), Bessel functions of the first kind of integer order and real z:
    [v + 1, *z.shape], z's dtype (16-bit floats computed in float32). Miller's backward
    recurrence from order n_iter, normalized by J₀ + 2·Σ J₂ₖ = 1 (Zhang and Jin 1996, as
    jax); n_iter must exceed v and
    |z| by a margin (jax's rule of thumb in its docstring). Differentiable in z through the
    recurrence (as jax). Unlike jax: the recurrence is rescaled where it would overflow (jax
    gives NaN for |z| below ~4 in float32), z = 0 gives scipy's J₀ = 1, Jₖ = 0 (jax: NaN; the
    derivative there is 0), and v < 0 or v > n_iter is a ValueError (jax returns fewer rows)."""
    (z,) = (asarray(a) for a in promote_dtypes_inexact(asarray(z)))
    if np.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("bessel_jn: complex input not supported.")
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"Argument v of bessel_jn must be a static Python int, got "
                        f"{v!r}") from None
    try:
        n_iter = operator.index(n_iter)
    except TypeError:
        raise TypeError(f"Argument n_iter of bessel_jn must be a static Python int, got "
                        f"{n_iter!r}") from None
    if not 0 <= v <= n_iter:
        raise ValueError(f"bessel_jn needs 0 <= v <= n_iter, got v={v}, n_iter={n_iter}.")
    if z.dtype not in (np.float32, np.float64):       # 16-bit floats: in float32
        return bessel_jn(z.astype(np.float32), v=v, n_iter=n_iter).astype(z.dtype)
    # the unnormalized values grow like (2k/z)^k downwards: rescale them (and the rows kept so
    # far) past √max so that they never overflow (jax's overflow to NaN in float32 for
    # |z| < ~4); the result is scale-free, so the rescaling carries no derivative
    big = _c(z, math.sqrt(np.finfo(z.dtype).max) / 1e4)
    f0, f1 = jnp.zeros_like(z), jnp.full_like(z, 1e-16)
    norm = jnp.zeros_like(z)
    rows = []
    for k in range(n_iter, -1, -1):                    # F_k = 2(k+1)/z·F_{k+1} - F_{k+2}
        f = _c(z, 2.0 * (k + 1)) * f1 / z - f0
        if k % 2 == 0:
            norm = norm + _c(z, 2.0) * f
        if k <= v:
            rows.append(f)
        f0, f1 = f1, f
        s = lax.stop_gradient(jnp.where(jnp.greater(lax.abs(f1), big), _c(z, 1.0) / big,
                                        _c(z, 1.0)))
        f0, f1, norm, rows = f0 * s, f1 * s, norm * s, [r * s for r in rows]
    out = jnp.stack(rows[::-1]) / (norm - f1)          # [v + 1, *z.shape]
    at_zero = (np.arange(v + 1) == 0).astype(z.dtype).reshape((v + 1,) + (1,) * z.ndim)
    return jnp.where(jnp.equal(z, 0), at_zero, out)    # J₀(0) = 1, Jₖ(0) = 0 (scipy's)


# ---- sph_harm_y ------------------------------------------------------------------------------
def sph_harm_y(n, m, theta, phi, diff_n: int | None = None, n_max: int | None = None):
    """The spherical harmonic Yₙᵐ(θ, φ) = Nₙᵐ·Pₙᵐ(cos θ)·e^(imφ) (θ the polar angle, φ the
    azimuth; Condon-Shortley phase; orthonormal on the sphere), complex in theta's and phi's
    precision. n, m (integers), theta and phi broadcast together (jax wants 1-D n, m, theta).
    n_max (static; max(n) by default, which needs concrete n) clips n and |m| to n_max in
    the Legendre function (jax's indexing);
    |m| > n gives 0 (jax's value). diff_n is not supported (NotImplementedError, as jax).
    Uses |sin θ| for √(1 - cos²θ) (more accurate near the poles than jax's form).
    Differentiable in theta and phi."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to sph_harm_y is not supported.")
    n, m = asarray(n), asarray(m)
    if n_max is None:
        try:
            n_max = int(np.max(np.asarray(n)))
        except Exception:
            raise TypeError("sph_harm_y: n_max must be given (a static int) when n is traced "
                            "(under jit or vmap).") from None
    try:
        n_max = operator.index(n_max)
    except TypeError:
        raise TypeError(f"Argument n_max of sph_harm_y must be a static Python int, got "
                        f"{n_max!r}") from None
    theta, phi = (asarray(t) for t in promote_dtypes_inexact(asarray(theta), asarray(phi)))
    if np.issubdtype(theta.dtype, np.complexfloating):
        raise ValueError("sph_harm_y: theta and phi must be real.")
    n, m, theta, phi = jnp.broadcast_arrays(n, m, theta, phi)
    dt = theta.dtype
    deg = jnp.minimum(n, n_max).astype(dt)
    am = jnp.minimum(lax.abs(m), n_max).astype(dt)     # jax clips the order's index too
    x, s = jnp.cos(theta), lax.abs(jnp.sin(theta))
    p = jnp.full_like(theta, 0.5 / _SQRT_PI)            # P̄₀⁰
    for i in range(1, n_max + 1):                     # P̄ₘᵐ = -√(1 + 1/(2m))·sin θ·P̄ₘ₋₁ᵐ⁻¹
        grow = jnp.less_equal(_c(theta, i), am)
        p = jnp.where(grow, p * _c(theta, -math.sqrt(1 + 0.5 / i)) * s, p)
    prev = jnp.zeros_like(p)
    for j in range(1, n_max + 1):                     # up in degree l = |m| + j while l <= n
        ll = am + _c(theta, j)
        on = jnp.less_equal(ll, deg)
        lls = jnp.where(on, ll, am + _c(theta, 1.0))
        alpha = jnp.sqrt((_c(theta, 4.0) * lls * lls - _c(theta, 1.0)) / (lls * lls - am * am))
        l1 = lls - _c(theta, 1.0)
        beta = jnp.sqrt((l1 * l1 - am * am) / (_c(theta, 4.0) * l1 * l1 - _c(theta, 1.0)))
        nxt = alpha * (x * p - beta * prev)
        prev, p = jnp.where(on, p, prev), jnp.where(on, nxt, p)
    p = jnp.where(jnp.greater(am, deg), jnp.zeros_like(p), p)
    angle = lax.abs(m).astype(dt) * phi
    y = lax.complex(p * jnp.cos(angle), p * jnp.sin(angle))
    odd = jnp.equal(jnp.remainder(lax.abs(m), 2), 1)
    conj = jnp.where(odd, -jnp.conj(y), jnp.conj(y))   # Yₙ⁻ᵐ = (-1)ᵐ·conj(Yₙᵐ)
    return jnp.where(jnp.less(m, 0), conj, y)
