"""Exponential integrals, as jax.scipy.special's (Cephes' algorithms): expi, exp1, expn.
Re-exported by fnad/scipy/special.py.

    expi(x) = -∫_{-x}^∞ e^(-t)/t dt: rational approximations on (0, 2], (2, 4], ... (32, 64],
              (64, ∞) (w = 1/x: e^x·w·(1 + w·A(w)/B(w))), -exp1(-x) for x < 0;
              JVP e^x/x·dx (jax's)
    expn(n, x) = ∫₁^∞ e^(-xt)/tⁿ dt, by jax's cases, the last that holds winning: NaN for
              n < 0 or x < 0; inf at x = 0 for n < 2, 1/n there for n >= 2 (jax's value);
              e^(-x)/x for n = 0; an asymptotic formula for n >= 5000; a continued fraction
              for x > 1; the power series where none holds (each entry iterating until its
              own term is below eps, as jax's vectorized loop);
              JVP -expn(n - 1, x)·dx, none in n (jax's)
    exp1(x) = expn(1, x)
"""
from __future__ import annotations

import functools
import operator

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.custom import custom_jvp
from fnad.numpy._core import asarray, promote_args_inexact

__all__ = ["exp1", "expi", "expn"]

_EXPINT1_A = (
    -5.350447357812542947283e0, 2.185049168816613393830e2, -4.176572384826693777058e3,
    5.541176756393557601232e4, -3.313381331178144034309e5, 1.592627163384945414220e6,)
_EXPINT1_B = (
    1.0, -5.250547959112862969197e1, 1.259616186786790571525e3, -1.756549581973534652631e4,
    1.493062117002725991967e5, -7.294949239640527645655e5, 1.592627163384945429726e6,)
_EXPINT2_A = (
    1.981808503259689673238e-2, -1.271645625984917501326e0, -2.088160335681228318920e0,
    2.755544509187936721172e0, -4.409507048701600257171e-1, 4.665623805935891391017e-2,
    -1.545042679673485262580e-3, 7.059980605299617478514e-5,)
_EXPINT2_B = (
    1.0, 1.476498670914921440652e0, 5.629177174822436244827e-1, 1.699017897879307263248e-1,
    2.291647179034212017463e-2, 4.450150439728752875043e-3, 1.727439612206521482874e-4,
    3.953167195549672482304e-5,)
_EXPINT3_A = (
    -1.373215375871208729803e0, -7.084559133740838761406e-1, 1.580806855547941010501e0,
    -2.601500427425622944234e-1, 2.994674694113713763365e-2, -1.038086040188744005513e-3,
    4.371064420753005429514e-5, 2.141783679522602903795e-6,)
_EXPINT3_B = (
    1.0, 8.585231423622028380768e-1, 4.483285822873995129957e-1, 7.687932158124475434091e-2,
    2.449868241021887685904e-2, 8.832165941927796567926e-4, 4.590952299511353531215e-4,
    -4.729848351866523044863e-6, 2.665195537390710170105e-6,)
_EXPINT4_A = (
    -2.106934601691916512584e0, 1.732733869664688041885e0, -2.423619178935841904839e-1,
    2.322724180937565842585e-2, 2.372880440493179832059e-4, -8.343219561192552752335e-5,
    1.363408795605250394881e-5, -3.655412321999253963714e-7, 1.464941733975961318456e-8,
    6.176407863710360207074e-10,)
_EXPINT4_B = (
    1.0, -2.298062239901678075778e-1, 1.105077041474037862347e-1, -1.566542966630792353556e-2,
    2.761106850817352773874e-3, -2.089148012284048449115e-4, 1.708528938807675304186e-5,
    -4.459311796356686423199e-7, 1.394634930353847498145e-8, 6.150865933977338354138e-10,)
_EXPINT5_A = (
    -2.458119367674020323359e-1, -1.483382253322077687183e-1, 7.248291795735551591813e-2,
    -1.348315687380940523823e-2, 1.342775069788636972294e-3, -7.942465637159712264564e-5,
    2.644179518984235952241e-6, -4.239473659313765177195e-8,)
_EXPINT5_B = (
    1.0, -1.044225908443871106315e-1, -2.676453128101402655055e-1, 9.695000254621984627876e-2,
    -1.601745692712991078208e-2, 1.496414899205908021882e-3, -8.462452563778485013756e-5,
    2.728938403476726394024e-6, -4.239462431819542051337e-8,)
_EXPINT6_A = (
    1.212561118105456670844e-1, -5.823133179043894485122e-1, 2.348887314557016779211e-1,
    -3.040034318113248237280e-2, 1.510082146865190661777e-3, -2.523137095499571377122e-5,)
_EXPINT6_B = (
    1.0, -1.002252150365854016662e0, 2.928709694872224144953e-1, -3.337004338674007801307e-2,
    1.560544881127388842819e-3, -2.523137093603234562648e-5,)
_EXPINT7_A = (
    -7.657847078286127362028e-1, 6.886192415566705051750e-1, -2.132598113545206124553e-1,
    3.346107552384193813594e-2, -3.076541477344756050249e-3, 1.747119316454907477380e-4,
    -6.103711682274170530369e-6, 1.218032765428652199087e-7, -1.086076102793290233007e-9,)
_EXPINT7_B = (
    1.0, -1.888802868662308731041e0, 1.066691687211408896850e0, -2.751915982306380647738e-1,
    3.930852688233823569726e-2, -3.414684558602365085394e-3, 1.866844370703555398195e-4,
    -6.345146083130515357861e-6, 1.239754287483206878024e-7, -1.086076102793126632978e-9,)


def _c(x, v):
    return np.asarray(v, x.dtype)


def _expint_small(x):                                  # 0 < x <= 2
    f = jnp.polyval(np.array(_EXPINT1_A, x.dtype), x) / \
        jnp.polyval(np.array(_EXPINT1_B, x.dtype), x)
    return x * f + _c(x, np.euler_gamma) + jnp.log(x)


def _expint_k(a, b):
    def branch(x):                                     # w = 1/x: e^x·w·(1 + w·A(w)/B(w))
        one = _c(x, 1.0)
        w = one / x
        f = jnp.polyval(np.array(a, x.dtype), w) / jnp.polyval(np.array(b, x.dtype), w)
        return jnp.exp(x) * w * (w * f + one)
    return branch


_EXPI_BRANCHES = [_expint_small, _expint_k(_EXPINT2_A, _EXPINT2_B),
                  _expint_k(_EXPINT3_A, _EXPINT3_B), _expint_k(_EXPINT4_A, _EXPINT4_B),
                  _expint_k(_EXPINT5_A, _EXPINT5_B), _expint_k(_EXPINT6_A, _EXPINT6_B)]


def _expi_pos(x):
    out = _expint_k(_EXPINT7_A, _EXPINT7_B)(x)        # x > 64 (and 0, NaN: jax's default)
    for i, branch in enumerate(_EXPI_BRANCHES):       # (2^i, 2^(i+1)], (0, 2] for i = 0
        lo = 0.0 if i == 0 else 2.0 ** i
        inside = jnp.greater(x, lo) & jnp.less_equal(x, 2.0 ** (i + 1))
        out = jnp.where(inside, branch(x), out)
    return out


def expi(x):
    """The exponential integral Ei(x) (real x)."""
    (x,) = (asarray(a) for a in promote_args_inexact("expi", x))
    if np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("expi does not support complex-valued inputs.")
    return _expi(x)


@custom_jvp
def _expi(x):
    negative = jnp.less(x, 0)
    return jnp.where(negative, -exp1(-x), _expi_pos(x))


@_expi.defjvp
def _expi_jvp(primals, tangents):                      # d Ei = e^x/x dx
    (x,), (x_dot,) = primals, tangents
    return _expi(x), jnp.exp(x) / x * x_dot


def _masked_loop(active_fn, body, state):
    """Iterate `body` on the entries where `active_fn(state)` holds until none does (each
    entry stops on its own, as jax's vectorized while_loop)."""
    def cond(s):
        return jnp.any(active_fn(s))

    def step(s):
        on = active_fn(s)
        new = body(s)
        return tuple(jnp.where(on, b, a) for a, b in zip(s, new))
    return lax.while_loop(cond, step, state)


def _expn_series(x, n):                                # 0 < x <= 1: the power series
    eps = _c(x, np.finfo(x.dtype).eps)
    zero, one = _c(x, 0.0), _c(x, 1.0)
    psi = -_c(x, np.euler_gamma) - jnp.log(x)         # ψ(n) - log x, ψ(n) = -γ + Σ_{i<n} 1/i
    i0 = jnp.ones_like(x)
    _, psi = _masked_loop(lambda s: jnp.less(s[0], n), lambda s: (s[0] + one, s[1] + one / s[0]),
                          (i0, psi))
    n1 = jnp.where(jnp.equal(n, 1), one + one, n)
    z = -x
    state = (jnp.zeros_like(x), jnp.ones_like(x), one - n,
             jnp.where(jnp.equal(n, 1), zero, one / (one - n1)), jnp.full_like(x, np.inf))

    def body(s):
        xk, yk, pk, ans, _ = s
        xk = xk + one
        yk = yk * z / xk
        pk = pk + one
        ans = ans + jnp.where(jnp.not_equal(pk, 0), yk / pk, zero)
        t = jnp.where(jnp.not_equal(ans, 0), jnp.abs(yk / ans), one)
        return xk, yk, pk, ans, t
    _, _, _, ans, _ = _masked_loop(lambda s: jnp.greater(x, 0) & jnp.greater(s[4], eps), body,
                                   state)
    return z ** (n - one) * psi / jnp.exp(lax.lgamma(n)) - ans


def _expn_fraction(x, n):                              # x > 1: the continued fraction
    big = _c(x, 1.44115188075855872e17)
    eps = _c(x, np.finfo(x.dtype).eps)
    zero, one, two = _c(x, 0.0), _c(x, 1.0), _c(x, 2.0)
    state = (jnp.ones_like(x), jnp.ones_like(x), x, jnp.ones_like(x), x + n, one / (x + n),
             jnp.full_like(x, np.inf), jnp.zeros_like(x))

    def body(s):
        k, pkm2, qkm2, pkm1, qkm1, ans, _, r = s
        k = k + one
        odd = jnp.equal(jnp.remainder(k, two), one)
        yk = jnp.where(odd, one, x)
        xk = jnp.where(odd, n + (k - one) / two, k / two)
        pk = pkm1 * yk + pkm2 * xk
        qk = qkm1 * yk + qkm2 * xk
        nz = jnp.not_equal(qk, 0)
        r = jnp.where(nz, pk / qk, r)
        t = jnp.where(nz, jnp.abs((ans - r) / r), one)
        ans = jnp.where(nz, r, ans)
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        scale = jnp.where(jnp.greater(jnp.abs(pk), big), big, one)
        return k, pkm2 / scale, qkm2 / scale, pkm1 / scale, qkm1 / scale, ans, t, r
    out = _masked_loop(lambda s: jnp.greater(x, zero) & jnp.greater(s[6], eps), body, state)
    return out[5] * jnp.exp(-x)


def _expn_large_n(x, n):                               # n >= 5000
    one = _c(x, 1.0)
    xk = x + n
    yk = one / (xk * xk)
    ans = yk * n * (_c(x, 6) * x * x - _c(x, 8) * n * x + n * n)
    ans = yk * (ans + n * (n - _c(x, 2) * x))
    ans = yk * (ans + n)
    return (ans + one) * jnp.exp(-x) / xk


def expn(n, x):
    """The generalized exponential integral Eₙ(x) (n a whole number, as a float)."""
    n, x = (asarray(a) for a in promote_args_inexact("expn", n, x))
    if np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("expn does not support complex-valued inputs.")
    return _expn(*jnp.broadcast_arrays(n, x))


@custom_jvp
def _expn(n, x):
    # jax's jnp.piecewise: where several conditions hold, the last one listed wins (so x > 1
    # takes the continued fraction even for n < 0 or n = 0, and n >= 5000 the asymptotic
    # formula even for x < 0); the series where none holds
    one = _c(x, 1.0)
    conds = [jnp.less(n, 0) | jnp.less(x, 0),
             jnp.equal(x, 0) & jnp.less(n, 2),
             jnp.equal(x, 0) & jnp.greater_equal(n, 2),
             jnp.equal(n, 0) & jnp.greater_equal(x, 0),
             jnp.greater_equal(n, 5000),
             jnp.greater(x, one)]
    series, fraction = ~functools.reduce(operator.or_, conds), conds[5]
    n1 = jnp.where(jnp.equal(n, 1), n + n, n)
    values = [_c(x, np.nan), _c(x, np.inf), one / n1, jnp.exp(-x) / x, _expn_large_n(x, n),
              _expn_fraction(jnp.where(fraction, x, _c(x, 2.0)), n)]
    out = _expn_series(jnp.where(series, x, _c(x, 0.5)), jnp.where(series, n, one))
    for cond, value in zip(conds, values):
        out = jnp.where(cond, value, out)
    return out


@_expn.defjvp
def _expn_jvp(primals, tangents):                      # d Eₙ = -Eₙ₋₁ dx; none in n (jax's)
    (n, x), (_, x_dot) = primals, tangents
    return _expn(n, x), -x_dot * _expn(n - 1, x)


def exp1(x):
    """E₁(x) = ∫₁^∞ e^(-xt)/t dt (real x)."""
    (x,) = (asarray(a) for a in promote_args_inexact("exp1", x))
    if np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("exp1 does not support complex-valued inputs.")
    return expn(1, x)
