"""Counting distributions of jax.random, re-exported by fnad.random: poisson, binomial and
multinomial. Each is jax 0.10's algorithm with jax's key use (the same splits, the same
uniform draws in the same loop iterations), so a key gives jax's counts: integers decided by
float comparisons, equal to jax's except where fnad's log/lgamma/log1p and XLA's differ in the
last bit right at an acceptance boundary (not seen in the tests' tens of thousands of draws).

    poisson   lam < 10 (or NaN): Knuth, multiply uniforms until the product drops below
              e^-lam (in log space); else Hörmann's transformed rejection (PTRS). Both
              run on the whole array (one key, one while loop each); the result picks per
              entry. lam is float32 whatever its dtype (as jax).
    binomial  n·q <= 10 (q = min(p, 1 - p)): inversion, counting geometric gaps until they
              pass n; else Kachitvichyanukul & Schmeiser's BTRS. NaN for NaN/negative n or
              NaN/negative p, inf for n = inf; p > 1/2 samples n - Binomial(n, 1 - p).
    multinomial  a scan over the categories: count_k ~ Binomial(remaining n,
              p_k / Σ_{j>=k} p_j), with the k-th key of split(key, K).

Like jax's, the loops run while any entry still has to: an entry's result can depend on how
long the others ran (rejection keeps the last accepted draw), which is why jit, vmap and the
eager run all give jax's values only when they run the same whole-array loop (vmap: per
member, as jax.vmap's batched while does). jax's iteration caps (the dtype's max) are left
out: they are never reached.

Imports fnad.lax, fnad.numpy and the key helpers of fnad.random at import time.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fnad import dtypes as _dtypes
from fnad import lax
from fnad import numpy as jnp
from fnad.numpy._core import check_arraylike, promote_dtypes_inexact
from fnad.random import _check_key, _check_shape, _shape, split, uniform

__all__ = ["binomial", "multinomial", "poisson"]


def _full(value, shape, dtype):
    return jnp.full(shape, value, dtype)


def _isnan(x):
    return lax.ne(x, x)


def _broadcast_to(name: str, what: str, x, shape):
    """x broadcast to `shape` (one-way, as jnp.broadcast_to), with a clear error."""
    x_shape = np.shape(x)
    try:
        ok = np.broadcast_shapes(x_shape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: {what} of shape {x_shape} cannot be broadcast to the "
                         f"requested shape {tuple(shape)}")
    return jnp.broadcast_to(x, shape)


# ---- poisson -------------------------------------------------------------------------------
def _poisson_knuth(key, lam, shape, dtype):
    """Knuth: k = the number of uniforms whose running product stays above e^-lam (log space:
    Σ log u > -lam), one split of the key and one uniform array per round."""
    def cond_fn(carry):
        _, _, log_prod = carry
        return jnp.any(lax.gt(log_prod, lax.neg(lam)))

    def body_fn(carry):
        k, key, log_prod = carry
        key, subkey = split(key)
        k = lax.select(lax.gt(log_prod, lax.neg(lam)), lax.add(k, 1), k)
        u = uniform(subkey, shape, np.float32)
        return k, key, lax.add(log_prod, lax.log(u))

    k, _, _ = lax.while_loop(cond_fn, body_fn, (_full(0, shape, dtype), key,
                                                _full(0.0, shape, np.float32)))
    return lax.sub(k, 1)


def _poisson_rejection(key, lam, shape, dtype):
    """Hörmann's PTRS (transformed rejection with squeeze), for lam >= 10:
        b = 0.931 + 2.53 √lam, a = -0.059 + 0.02483 b, 1/α = 1.1239 + 1.1328/(b - 3.4),
        v_r = 0.9277 - 3.6224/(b - 2); per round u ~ U(-1/2, 1/2), v ~ U(0, 1), us = 1/2 - |u|,
        k = ⌊(2a/us + b) u + lam + 0.43⌋; accept if us >= 0.07 and v <= v_r, or unless
        (k < 0 or us < 0.013 and v > us) if log(v/α / (a/us² + b)) <= -lam + k log lam -
        log k!. An accepted entry takes every later accepted k too (as jax)."""
    log_lam = lax.log(lam)
    b = lax.add(0.931, lax.mul(2.53, lax.sqrt(lam)))
    a = lax.add(-0.059, lax.mul(0.02483, b))
    inv_alpha = lax.add(1.1239, lax.div(1.1328, lax.sub(b, 3.4)))
    v_r = lax.sub(0.9277, lax.div(3.6224, lax.sub(b, 2.0)))

    def cond_fn(carry):
        _, accepted, _ = carry
        return jnp.any(lax.bitwise_not(accepted))

    def body_fn(carry):
        k_out, accepted, key = carry
        key, subkey_0, subkey_1 = split(key, 3)
        u = lax.sub(uniform(subkey_0, shape, lam.dtype), 0.5)
        v = uniform(subkey_1, shape, lam.dtype)
        us = lax.sub(0.5, lax.abs(u))
        k = lax.floor(lax.add(lax.add(lax.mul(lax.add(lax.div(lax.mul(2.0, a), us), b), u),
                                      lam), 0.43))
        s = lax.log(lax.div(lax.mul(v, inv_alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        t = lax.sub(lax.add(lax.neg(lam), lax.mul(k, log_lam)), lax.lgamma(lax.add(k, 1.0)))
        accept1 = lax.bitwise_and(lax.ge(us, 0.07), lax.le(v, v_r))
        reject = lax.bitwise_or(lax.lt(k, 0.0),
                                lax.bitwise_and(lax.lt(us, 0.013), lax.gt(v, us)))
        accept = lax.bitwise_or(accept1,
                                lax.bitwise_and(lax.bitwise_not(reject), lax.le(s, t)))
        return lax.select(accept, k, k_out), lax.bitwise_or(accepted, accept), key

    k, _, _ = lax.while_loop(cond_fn, body_fn, (_full(-1.0, shape, lam.dtype),
                                                _full(False, shape, np.bool_), key))
    return lax.convert_element_type(k, dtype)


def poisson(key, lam, shape: Sequence[int] | None = None, dtype=None):
    """Poisson(lam) integers (default dtype int32, int64 under x64) of `shape` (default
    lam's; lam must broadcast to it). 0 where lam = 0, -1 where lam is NaN or negative,
    the dtype's max where lam = inf (as jax). See the module docstring for the algorithm.
    threefry2x32 keys only, as in jax (NotImplementedError for rbg and unsafe_rbg keys)."""
    k = _check_key("poisson", key)
    if k._impl != "threefry2x32":
        raise NotImplementedError(f"`poisson` is only implemented for the threefry2x32 RNG, "
                                  f"not {k._impl}")
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_int_dtype() if dtype is None
                                       else dtype)
    if not _dtypes.is_int(dtype):
        raise ValueError(f"dtype argument to `poisson` must be an int dtype, got {dtype}")
    check_arraylike("poisson", lam)
    shape = np.shape(lam) if shape is None else _shape(shape)
    lam = lax.convert_element_type(_broadcast_to("poisson", "lam", lam, shape), np.float32)
    use_knuth = lax.bitwise_or(_isnan(lam), lax.lt(lam, 10.0))
    lam_knuth = lax.select(use_knuth, lam, _full(0.0, shape, np.float32))
    # rejection's acceptance rate tends to 89% as lam grows: a large stand-in where unused
    lam_rejection = lax.select(use_knuth, _full(1e5, shape, np.float32), lam)
    out = lax.select(use_knuth, _poisson_knuth(k, lam_knuth, shape, dtype),
                     _poisson_rejection(k, lam_rejection, shape, dtype))
    return lax.select(lax.eq(lam, 0.0), _full(0, shape, dtype), out)


# ---- binomial ------------------------------------------------------------------------------
def _binomial_inversion(key, count, prob, shape, dtype):
    """Count the geometric(prob) gaps ⌈log u / log(1 - prob)⌉ whose running sum stays <= n:
    that count minus one is Binomial(n, prob)."""
    log1minusprob = lax.log1p(lax.neg(prob))                       # -prob: -0.0 at prob = 0

    def cond_fn(carry):
        _, geom_sum, _ = carry
        return jnp.any(lax.le(geom_sum, count))

    def body_fn(carry):
        num_geom, geom_sum, key = carry
        keys = split(key)
        subkey, key = keys[0], keys[1]
        num_geom = lax.select(lax.le(geom_sum, count), lax.add(num_geom, 1.0), num_geom)
        u = uniform(subkey, shape, prob.dtype)
        geom = lax.ceil(lax.div(lax.log(u), log1minusprob))
        return num_geom, lax.add(geom_sum, geom), key

    zeros = _full(0.0, shape, prob.dtype)
    k, _, _ = lax.while_loop(cond_fn, body_fn, (zeros, zeros, key))
    return lax.convert_element_type(lax.sub(k, 1.0), dtype)


_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                           0.00833056343336287])


def _stirling_approx_tail(k):
    """log k! - Stirling's approximation: a table for k <= 9, else the series
    (1/12 - (1/360 - 1/1260/(k+1)²)/(k+1)²)/(k+1), evaluated (as jax's) at min(k, 9)."""
    table = jnp.asarray(_STIRLING_TAIL.astype(k.dtype))
    use_table = lax.le(k, 9.0)
    k = lax.clamp(jnp.zeros((), k.dtype), k, jnp.full((), 9.0, k.dtype))
    kp1sq = lax.mul(lax.add(k, 1.0), lax.add(k, 1.0))
    approx = lax.div(lax.sub(1.0 / 12, lax.div(lax.sub(1.0 / 360, lax.div(1.0 / 1260, kp1sq)),
                                               kp1sq)), lax.add(k, 1.0))
    idx = lax.convert_element_type(lax.floor(k), np.int32)
    return lax.select(use_table, jnp.take(table, idx), approx)


def _btrs(key, count, prob, shape, dtype):
    """Kachitvichyanukul & Schmeiser's BTRS (transformed rejection), for n·p > 10:
        σ = √(n p (1-p)), b = 1.15 + 2.53σ, a = -0.0873 + 0.0248 b + 0.01 p, c = n p + 1/2,
        v_r = 0.92 - 4.2/b, r = p/(1-p), α = (2.83 + 5.1/b)σ, m = ⌊(n+1)p⌋; per round
        u ~ U(-1/2, 1/2), v ~ U(0, 1), us = 1/2 - |u|, k = ⌊(2a/us + b) u + c⌋; accept if
        us >= 0.07 and v <= v_r, or if 0 <= k <= n and log(vα/(a/us² + b)) is below the
        log ratio of the densities at k and m (with Stirling tails)."""
    stddev = lax.sqrt(lax.mul(lax.mul(count, prob), lax.sub(1.0, prob)))
    b = lax.add(1.15, lax.mul(2.53, stddev))
    a = lax.add(lax.add(-0.0873, lax.mul(0.0248, b)), lax.mul(0.01, prob))
    c = lax.add(lax.mul(count, prob), 0.5)
    v_r = lax.sub(0.92, lax.div(4.2, b))
    r = lax.div(prob, lax.sub(1.0, prob))
    alpha = lax.mul(lax.add(2.83, lax.div(5.1, b)), stddev)
    m = lax.floor(lax.mul(lax.add(count, 1.0), prob))

    def cond_fn(carry):
        _, accepted, _ = carry
        return jnp.any(lax.bitwise_not(accepted))

    def body_fn(carry):
        k_out, accepted, key = carry
        key, subkey_0, subkey_1 = split(key, 3)
        u = uniform(subkey_0, shape, prob.dtype)
        v = uniform(subkey_1, shape, prob.dtype)
        u = lax.sub(u, 0.5)
        us = lax.sub(0.5, lax.abs(u))
        accept1 = lax.bitwise_and(lax.ge(us, 0.07), lax.le(v, v_r))
        k = lax.floor(lax.add(lax.mul(lax.add(lax.div(lax.mul(2.0, a), us), b), u), c))
        reject = lax.bitwise_or(lax.lt(k, 0.0), lax.gt(k, count))
        v = lax.log(lax.div(lax.mul(v, alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        n_m1, n_k1 = lax.add(lax.sub(count, m), 1.0), lax.add(lax.sub(count, k), 1.0)
        ub = lax.add(lax.add(lax.add(
            lax.mul(lax.add(m, 0.5), lax.log(lax.div(lax.add(m, 1.0), lax.mul(r, n_m1)))),
            lax.mul(lax.add(count, 1.0), lax.log(lax.div(n_m1, n_k1)))),
            lax.mul(lax.add(k, 0.5), lax.log(lax.div(lax.mul(r, n_k1), lax.add(k, 1.0))))),
            _stirling_approx_tail(m))
        ub = lax.sub(lax.sub(lax.add(ub, _stirling_approx_tail(lax.sub(count, m))),
                             _stirling_approx_tail(k)),
                     _stirling_approx_tail(lax.sub(count, k)))
        accept = lax.bitwise_or(accept1,
                                lax.bitwise_and(lax.bitwise_not(reject), lax.le(v, ub)))
        return lax.select(accept, k, k_out), lax.bitwise_or(accepted, accept), key

    k, _, _ = lax.while_loop(cond_fn, body_fn, (_full(-1.0, shape, prob.dtype),
                                                _full(False, shape, np.bool_), key))
    return lax.convert_element_type(k, dtype)


def binomial(key, n, p, shape: Sequence[int] | None = None, dtype=None):
    """Binomial(n, p) counts as floats (default dtype float32, float64 under x64) of `shape`
    (default: n's and p's broadcast shape). Computed in p's inexact dtype; n is floored.
    NaN where n is NaN or negative or p is NaN or negative, inf where n = inf."""
    k = _check_key("binomial", key)
    check_arraylike("binomial", n, p)
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_float_dtype() if dtype is None
                                       else dtype)
    if not _dtypes.is_float(dtype):
        raise ValueError(f"dtype argument to `binomial` must be a float dtype, got {dtype}")
    if shape is None:
        shape = tuple(np.broadcast_shapes(np.shape(n), np.shape(p)))
    else:
        shape = _shape(shape)
        _check_shape("binomial", shape, np.shape(n), np.shape(p))
    (prob,) = promote_dtypes_inexact(p)
    count = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(n), prob.dtype), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = lax.lt(prob, 0.5)
    q = lax.select(p_lt_half, prob, lax.sub(1.0, prob))
    count_nan_or_neg = lax.bitwise_or(_isnan(count), lax.lt(count, 0.0))
    count_inf = jnp.isinf(count)
    q_is_nan = _isnan(q)
    q_lt_0 = lax.lt(q, 0.0)
    q = lax.select(lax.bitwise_or(q_is_nan, q_lt_0), _full(0.01, shape, q.dtype), q)
    use_inversion = lax.bitwise_or(count_nan_or_neg, lax.le(lax.mul(count, q), 10.0))
    count = lax.floor(count)                          # as np.random.binomial for float n
    count_inv = lax.select(use_inversion, count, _full(0.0, shape, count.dtype))
    count_btrs = lax.select(use_inversion, _full(1e4, shape, count.dtype), count)
    q_btrs = lax.select(use_inversion, _full(0.5, shape, q.dtype), q)
    samples = lax.select(use_inversion, _binomial_inversion(k, count_inv, q, shape, dtype),
                         _btrs(k, count_btrs, q_btrs, shape, dtype))
    invalid = lax.bitwise_or(lax.bitwise_or(q_lt_0, q_is_nan), count_nan_or_neg)
    samples = lax.select(invalid, _full(np.nan, shape, dtype), samples)
    samples = lax.select(lax.bitwise_and(count_inf, lax.bitwise_not(invalid)),
                         _full(np.inf, shape, dtype), samples)
    keep = lax.bitwise_or(lax.bitwise_or(p_lt_half, count_nan_or_neg),
                          lax.bitwise_or(q_is_nan, count_inf))
    return lax.select(keep, samples, lax.sub(lax.convert_element_type(count, dtype), samples))


# ---- multinomial ---------------------------------------------------------------------------
def multinomial(key, n, p, *, shape: Sequence[int] | None = None, dtype=None,
                unroll: int | bool = 1):
    """Multinomial counts of n trials over the categories of p (last axis, K of them):
    [*shape] with shape[-1] = K (default p's shape; n broadcasts to shape[:-1], p to shape),
    as floats (default float32, float64 under x64). p need not be normalized (as jax: each
    category's ratio is p_k over the sum of the remaining ones). `unroll` is accepted for
    jax compatibility (fnad's scan does not unroll)."""
    k = _check_key("multinomial", key)
    check_arraylike("multinomial", n, p)
    n, p = (jnp.asarray(v) for v in promote_dtypes_inexact(n, p))
    dtype = _dtypes.canonicalize_dtype(_dtypes.default_float_dtype() if dtype is None
                                       else dtype)
    if p.ndim < 1:
        raise ValueError(f"multinomial: p must have at least one dimension (the categories), "
                         f"got shape {p.shape}")
    shape = p.shape if shape is None else _shape(shape)
    if not shape:
        raise ValueError("multinomial: shape must end with the number of categories, got ()")
    n = _broadcast_to("multinomial", "n", n, shape[:-1])           # [*B]
    p = _broadcast_to("multinomial", "p", p, shape)                # [*B, K]
    p = jnp.moveaxis(p, -1, 0)                                     # [K, *B]
    remaining = lax.cumsum(p, 0, reverse=True)                     # Σ_{j>=k} p_j
    ratios = lax.div(p, jnp.where(lax.eq(remaining, 0.0), 1.0, remaining))
    keys = split(k, ratios.shape[0])                               # [K, 2]

    def step(remainder, ratio_key):
        ratio, subkey = ratio_key
        count = binomial(subkey, remainder, jnp.clip(ratio, 0, 1), dtype=remainder.dtype)
        return lax.sub(remainder, count), count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)  # [K, *B]
    return lax.convert_element_type(jnp.moveaxis(counts, 0, -1), dtype)
