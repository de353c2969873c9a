"""The hypergeometric functions of jax.scipy.special, ₁F₁ and ₂F₁. Re-exported by
fnad/scipy/special.py. Composed from fnad.lax and fnad.numpy (so each traces, jits, vmaps and
differentiates):

    hyp1f1(a, b, x) = ₁F₁: Kummer's transformation for x < 0, the power series for |x| below
                   100 (30 in float32) or the parameters, the asymptotic series above; JVP in
                   a, b (series) and x
    hyp2f1(a, b, c, x) = ₂F₁: Pfaff's transformation for x < 0, the power series for
                   z <= 0.9, the 1 - z transformation above (its limit for whole c - a - b);
                   JVP in a, b, c (series) and x
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.custom import custom_jvp
from fnad.scipy._special_more2 import _c, _masked_loop, _real, _upcast_half

__all__ = ["hyp1f1", "hyp2f1"]


# ---- hyp1f1 ----------------------------------------------------------------------------------
def _is_nonpos_int(a):
    return jnp.less_equal(a, 0) & jnp.equal(a, jnp.round(a))


def _hyp1f1_series(a, b, y, max_iter):
    """Σₖ (a)ₖ/(b)ₖ·yᵏ/k! and its derivatives in a and b (the sums of tₖ·Σ_{j<k} 1/(a+j)
    and -tₖ·Σ_{j<k} 1/(b+j)), summed until the term is below eps of the sum."""
    eps = _c(y, np.finfo(y.dtype).eps)
    zero, one = jnp.zeros_like(y), jnp.ones_like(y)
    state = (zero, one, one, zero, zero, zero, zero)   # k, term, sum, Ha, Hb, dsum_a, dsum_b

    def body(s):
        k, t, m, ha, hb, da, db = s
        ha, hb = ha + _c(y, 1.0) / (a + k), hb + _c(y, 1.0) / (b + k)
        t = t * (a + k) / (b + k) * y / (k + _c(y, 1.0))
        return k + _c(y, 1.0), t, m + t, ha, hb, da + t * ha, db - t * hb

    def active(s):
        return jnp.greater(lax.abs(s[1]), eps * lax.abs(s[2]))
    _, _, m, _, _, da, db = _masked_loop(active, body, state, max_iter)
    return m, da, db


def _hyp1f1_asymptotic(a, b, y):
    """M(a, b, y) ~ Γ(b)/Γ(a)·e^y·y^(a-b)·Σₖ (b-a)ₖ(1-a)ₖ/k!·y^(-k) for large y > 0, summed
    to eps or to its smallest term; returned as (signed sum, log of the prefactor)."""
    from fnad.scipy._special_more import gammasgn
    eps = _c(y, np.finfo(y.dtype).eps)
    zero, one = jnp.zeros_like(y), jnp.ones_like(y)

    def body(s):
        k, t, m = s
        t = t * (b - a + k) * (_c(y, 1.0) - a + k) / ((k + _c(y, 1.0)) * y)
        return k + _c(y, 1.0), t, m + t

    def active(s):                                     # converging, and still above eps
        k, t, m = s
        nxt = lax.abs((b - a + k) * (_c(y, 1.0) - a + k) / ((k + _c(y, 1.0)) * y))
        return jnp.greater(lax.abs(t), eps * lax.abs(m)) & jnp.less(nxt, 1)
    _, _, m = _masked_loop(active, body, (zero, one, one), 200)
    sign = gammasgn(b) * gammasgn(a)                   # Γ(b)/Γ(a) in logs: no overflow
    return sign * m, y + (a - b) * jnp.log(y) + lax.lgamma(b) - lax.lgamma(a)


def hyp1f1(a, b, x):
    """The confluent hypergeometric function ₁F₁(a; b; x) = Σₖ (a)ₖ/(b)ₖ·xᵏ/k! (real a, b, x).
    As jax: 1 at a = 0 (also a = b = 0, where scipy gives inf), eˣ at a = b. As scipy: inf at
    the poles b = 0, -1, ... unless a is a non-positive integer > b (jax: inf at b = 0, ±inf
    or NaN at the others), NaN for NaN a or b (jax: 1). x < 0 goes through Kummer's
    e^x·₁F₁(b - a; b; -x) (no cancellation: jax sums the alternating series, which loses all
    digits for x << 0, and gives NaN for x <= -100); then the power series below 100 (30 in
    float32) or below 2(|b - a| + 1)(|1 - a| + 1), the asymptotic series above (where a is
    not a non-positive integer: those are polynomials, summed). Differentiable in a, b
    (their power series at every |x|, as jax, after Kummer's transformation for x < 0; they
    overflow with e^|x|) and x (d/dx =
    a/b·₁F₁(a+1; b+1; x)). ~1e-13 relative in float64 for moderate arguments; the summed
    series loses digits where its terms alternate and the result is small (x < 0 with
    a > b, x > 0 with a < 0; e.g. ~1e-9 in float64, worse in float32, for a ~ 20 > b,
    x ~ -30); in float32 e^|x| must fit (|x| < 88) where the series is summed."""
    a, b, x = _real("hyp1f1", a, b, x)
    return _hyp1f1(*jnp.broadcast_arrays(a, b, x))


def _hyp1f1_parts(a, b, x):
    """₁F₁, with Kummer's transformation for x < 0."""
    neg = jnp.less(x, 0)
    y = lax.abs(x)
    a1 = jnp.where(neg, b - a, a)                      # ₁F₁(a; b; x) = e^x·₁F₁(b-a; b; -x)
    # the asymptotic series where y is large against the parameters too (its terms then
    # shrink from the first); polynomials are summed
    one = _c(x, 1.0)
    big = jnp.greater_equal(y, 100.0 if x.dtype == np.float64 else 30.0) & \
        jnp.greater_equal(y, _c(x, 2.0) * (lax.abs(b - a1) + one) * (lax.abs(one - a1) + one)) \
        & ~_is_nonpos_int(a1)
    ys = jnp.where(big, jnp.ones_like(y), y)
    m = _hyp1f1_series(a1, b, ys, 3000)[0]
    yb = jnp.where(big, y, _c(x, 200.0))
    scale, log_pre = _hyp1f1_asymptotic(jnp.where(big, a1, _c(x, 0.5)),
                                        jnp.where(big, b, _c(x, 1.0)), yb)
    ex = jnp.where(neg, x, jnp.zeros_like(x))
    return jnp.where(big, scale * jnp.exp(log_pre + ex), m * jnp.exp(ex))


def _hyp1f1_dparams(a, b, x):
    """(∂₁F₁/∂a, ∂₁F₁/∂b): the power series' (at every |x|: no asymptotic form), through
    Kummer's transformation for x < 0 (∂a = -e^x·∂₁, ∂b = e^x·(∂₁ + ∂₂) at (b - a, b, -x))."""
    neg = jnp.less(x, 0)
    a1 = jnp.where(neg, b - a, a)
    _, da1, db1 = _hyp1f1_series(a1, b, lax.abs(x), 3000)
    ex = jnp.exp(jnp.where(neg, x, jnp.zeros_like(x)))
    return jnp.where(neg, -da1, da1) * ex, jnp.where(neg, da1 + db1, db1) * ex


def _hyp1f1_value(a, b, x):
    val = _hyp1f1_parts(a, b, x)
    # a pole at b = 0, -1, ... unless the series stops first (a a non-positive integer > b);
    # jax: inf at b = 0 only (its series gives ±inf or NaN at the other poles)
    pole = _is_nonpos_int(b) & ~(_is_nonpos_int(a) & jnp.greater(a, b))
    val = jnp.where(pole & jnp.not_equal(a, 0), _c(x, np.inf), val)
    val = jnp.where(jnp.equal(a, b) & jnp.not_equal(a, 0), jnp.exp(x), val)
    return jnp.where(jnp.equal(a, 0), _c(x, 1.0), val)


@custom_jvp
def _hyp1f1(a, b, x):
    return _upcast_half(_hyp1f1_value)(a, b, x)


_hyp1f1.defjvps(                                       # the series' derivatives in a and b;
    lambda a_dot, ans, a, b, x: a_dot * _upcast_half(_hyp1f1_dparams)(a, b, x)[0],
    lambda b_dot, ans, a, b, x: b_dot * _upcast_half(_hyp1f1_dparams)(a, b, x)[1],
    (lambda x_dot, ans, a, b, x: x_dot * a / b * _hyp1f1(a + _c(x, 1.0),
                                                                  b + _c(x, 1.0), x)))
#                                                        d/dx ₁F₁ = a/b·₁F₁(a+1; b+1; x)


# ---- hyp2f1 ----------------------------------------------------------------------------------
def _hyp2f1_series(a, b, c, z, max_iter):
    """Σₖ (a)ₖ(b)ₖ/(c)ₖ·zᵏ/k! and its derivatives in a, b, c (the sums of tₖ·Σ_{j<k} 1/(a+j)
    and likewise), summed until the term is below eps of the sum (or zero: a polynomial)."""
    eps = _c(z, np.finfo(z.dtype).eps)
    zero, one = jnp.zeros_like(z), jnp.ones_like(z)
    state = (zero, one, one, zero, zero, zero, zero, zero, zero)

    def body(s):
        k, t, f, ha, hb, hc, da, db, dc = s
        one_ = _c(z, 1.0)
        ha, hb, hc = ha + one_ / (a + k), hb + one_ / (b + k), hc + one_ / (c + k)
        t = t * (a + k) * (b + k) / ((c + k) * (k + one_)) * z
        return k + one_, t, f + t, ha, hb, hc, da + t * ha, db + t * hb, dc - t * hc

    def active(s):
        return jnp.greater(lax.abs(s[1]), eps * lax.abs(s[2]))
    out = _masked_loop(active, body, state, max_iter)
    return out[2], out[6], out[7], out[8]


def _hyp2f1_integer_d(a, b, m, w):
    """F(a, b; a+b+m; 1-w) for a whole m >= 0 and small w (Abramowitz and Stegun 15.3.10-11):
    Γ(m)Γ(a+b+m)/(Γ(a+m)Γ(b+m))·Σ_{n<m} (a)ₙ(b)ₙ/(n!(1-m)ₙ)·wⁿ
    - (-w)^m·Γ(a+b+m)/(Γ(a)Γ(b))·Σₙ (a+m)ₙ(b+m)ₙ/(n!(n+m)!)·wⁿ·(log w - ψ(n+1) - ψ(n+m+1)
    + ψ(a+n+m) + ψ(b+n+m)), the ψ stepped by ψ(y+1) = ψ(y) + 1/y."""
    from fnad.scipy._special_more import gamma
    eps = _c(w, np.finfo(w.dtype).eps)
    zero, one = jnp.zeros_like(w), jnp.ones_like(w)

    def finite_body(s):
        n, t, f = s
        t = t * (a + n) * (b + n) / ((n + _c(w, 1.0)) * (_c(w, 1.0) - m + n)) * w
        return n + _c(w, 1.0), t, f + t
    _, _, finite = _masked_loop(lambda s: jnp.less(s[0] + 1, m), finite_body, (zero, one, one),
                                2000)
    finite = jnp.where(jnp.greater(m, 0), finite, zero)
    psi = (lax.digamma(one), lax.digamma(m + one), lax.digamma(a + m), lax.digamma(b + m))
    log_w = jnp.log(w)
    t0 = one / jnp.exp(lax.lgamma(m + one))                # 1/m!

    def body(s):
        n, t, f, p1, p2, p3, p4 = s
        one_ = _c(w, 1.0)
        t = t * (a + m + n) * (b + m + n) / ((n + one_) * (n + m + one_)) * w
        p1, p2 = p1 + one_ / (n + one_), p2 + one_ / (n + m + one_)
        p3, p4 = p3 + one_ / (a + n + m), p4 + one_ / (b + n + m)
        return n + one_, t, f + t * (log_w - p1 - p2 + p3 + p4), p1, p2, p3, p4

    def active(s):
        return jnp.greater(lax.abs(s[1]), eps * lax.abs(s[2]))
    state = (zero, t0, t0 * (log_w - psi[0] - psi[1] + psi[2] + psi[3])) + psi
    infinite = _masked_loop(active, body, state, 500)[2]
    first = jnp.where(jnp.greater(m, 0), gamma(jnp.maximum(m, one)) * gamma(a + b + m) /
                      (gamma(a + m) * gamma(b + m)), zero) * finite
    sign = jnp.where(jnp.equal(jnp.remainder(m, 2), 1), -one, one)
    return first - sign * w ** m * gamma(a + b + m) / (gamma(a) * gamma(b)) * infinite


def _hyp2f1_unit(a, b, c, z):
    """₂F₁ for 0 <= z < 1: the power series for z <= 0.9 and for polynomials; above, the
    1 - z transformation Γ(c)Γ(d)/(Γ(c-a)Γ(c-b))·F(a, b; 1-d; 1-z)
    + (1-z)^d·Γ(c)Γ(-d)/(Γ(a)Γ(b))·F(c-a, c-b; d+1; 1-z), d = c - a - b, or its limit for
    a whole d (after Euler's F = (1-z)^d·F(c-a, c-b; c; z) for d < 0); the power series
    (up to 4000 terms) for d within 1e-4 of a whole number but not one."""
    from fnad.scipy._special_more import gamma
    d = c - a - b
    one = _c(z, 1.0)
    poly = _is_nonpos_int(a) | _is_nonpos_int(b)
    high = jnp.greater(z, 0.9) & ~poly
    whole = jnp.equal(d, jnp.round(d))
    euler = high & whole & jnp.less(d, 0)
    a2, b2 = jnp.where(euler, c - a, a), jnp.where(euler, c - b, b)
    near = high & jnp.greater(lax.abs(d - jnp.round(d)), 1e-4)
    integer = high & whole & ~(_is_nonpos_int(a2) | _is_nonpos_int(b2))
    zs = jnp.where(near | integer, _c(z, 0.5), z)
    w_all = one - zs
    direct = _hyp2f1_series(a2, b2, c, zs, 4000)[0] * jnp.where(euler, w_all ** d, one)
    dn = jnp.where(near, d, _c(z, 0.5))
    w = jnp.where(near | integer, one - z, _c(z, 0.05))
    f1 = _hyp2f1_series(a, b, one - dn, w, 500)[0]
    f2 = _hyp2f1_series(c - a, c - b, dn + one, w, 500)[0]
    g1 = gamma(c) * gamma(dn) / (gamma(c - a) * gamma(c - b))
    g2 = gamma(c) * gamma(-dn) / (gamma(a) * gamma(b))
    m = jnp.where(integer, lax.abs(d), one)
    by_m = _hyp2f1_integer_d(jnp.where(integer, a2, one), jnp.where(integer, b2, one), m, w)
    by_m = by_m * jnp.where(euler, w ** d, one)
    return jnp.where(near, g1 * f1 + w ** dn * g2 * f2, jnp.where(integer, by_m, direct))


def _hyp2f1_value(a, b, c, x):
    from fnad.scipy._special_more import gamma
    one = _c(x, 1.0)
    # Pfaff for x < 0: F(a, b; c; x) = (1-x)^(-a)·F(a, c-b; c; x/(x-1)); keep a polynomial's
    # non-positive integer parameter in the first place, so the transformed series stays one
    swap = _is_nonpos_int(b) & ~_is_nonpos_int(a)
    a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
    neg = jnp.less(x, 0)
    inside = jnp.less(x, 1)
    xs = jnp.where(inside, x, _c(x, 0.0))
    z = jnp.where(neg, xs / (xs - one), xs)
    val = _hyp2f1_unit(a, jnp.where(neg, c - b, b), c, z)
    val = jnp.where(neg, (one - xs) ** -a * val, val)
    d = c - a - b
    at_one = jnp.where(jnp.greater(d, 0), gamma(c) * gamma(d) / (gamma(c - a) * gamma(c - b)),
                       _c(x, np.inf))
    val = jnp.where(jnp.equal(x, 1), at_one, jnp.where(inside, val, _c(x, np.inf)))
    val = jnp.where(inside & jnp.equal(a, c), (one - xs) ** -b, val)
    val = jnp.where(inside & jnp.equal(b, c), (one - xs) ** -a, val)
    stops_first = (_is_nonpos_int(a) & jnp.greater(a, c)) | (_is_nonpos_int(b) &
                                                            jnp.greater(b, c))
    c_pole = _is_nonpos_int(c) & ~stops_first          # scipy's: a polynomial stopping before
    val = jnp.where(c_pole, _c(x, np.inf), val)        # the pole is summed (jax: inf)
    trivial = jnp.equal(x, 0) | ((jnp.equal(a, 0) | jnp.equal(b, 0)) & jnp.not_equal(c, 0))
    val = jnp.where(trivial, one, val)
    nan = jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(c) | jnp.isnan(x)
    return jnp.where(nan, _c(x, np.nan), val)


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function ₂F₁(a, b; c; x) = Σₖ (a)ₖ(b)ₖ/(c)ₖ·xᵏ/k! (real
    arguments, x <= 1). As jax: 1 at x = 0 and at a = 0 or b = 0 (c != 0); inf for x > 1
    and at x = 1 where c - a - b <= 0 (Gauss's Γ(c)Γ(c-a-b)/(Γ(c-a)Γ(c-b)) where > 0); inf
    at c a non-positive integer unless a or b is a non-positive integer > c (a polynomial
    that stops first: summed, as scipy; jax: inf). NaN in any argument gives NaN (jax: 1 or
    inf). Unlike jax (which sums the series directly and
    fails for x < -1), x < 0 goes through Pfaff's transformation, and 0.9 < z < 1 through the
    1 - z transformation (its limit, Abramowitz and Stegun 15.3.10-12, for a whole c - a - b;
    within 1e-4 of a whole number, but not one, the series is summed, up to 4000 terms:
    ~1e-10 for z up to ~0.99, worse closer to 1). Differentiable in
    a, b, c (their power series, valid for |x| < 1) and x (ab/c·₂F₁(a+1, b+1; c+1; x))."""
    a, b, c, x = _real("hyp2f1", a, b, c, x)
    return _hyp2f1(*jnp.broadcast_arrays(a, b, c, x))


@custom_jvp
def _hyp2f1(a, b, c, x):
    return _upcast_half(_hyp2f1_value)(a, b, c, x)


def _hyp2f1_dparam(i):
    def rule(t_dot, ans, a, b, c, x):                  # the power series' derivatives
        return t_dot * _upcast_half(lambda *s: _hyp2f1_series(*s, 4000)[i])(a, b, c, x)
    return rule


def _hyp2f1_dx(x_dot, ans, a, b, c, x):                # d/dx ₂F₁ = ab/c·₂F₁(a+1, b+1; c+1; x)
    one = _c(x, 1.0)
    return x_dot * a * b / c * _hyp2f1(a + one, b + one, c + one, x)


_hyp2f1.defjvps(_hyp2f1_dparam(1), _hyp2f1_dparam(2), _hyp2f1_dparam(3), _hyp2f1_dx)
