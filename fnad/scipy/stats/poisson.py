"""fnad.scipy.stats.poisson: the Poisson distribution with mean mu, as
jax.scipy.stats.poisson.

    x = k - loc
    logpmf(k) = xlogy(x, mu) - lgamma(x + 1) - mu; -inf for x < 0 or non-integer k
    cdf(k)    = gammaincc(floor(x + 1), mu), 0 for x < 0
    entropy(mu) = -Σ_k pmf(k)·log pmf(k), summed over k < mu + 20 (mu < 10) or
                  k < mu + 10√mu + 20 (mu < 100); the asymptotic
                  log(2πe·mu)/2 - 1/(12 mu) above; 0 at mu = 0 (jax's scheme)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import check_arraylike, promote_args_inexact, promote_dtypes_inexact
from fnad.scipy.special import entr, gammaincc, gammaln, xlogy

__all__ = ["cdf", "entropy", "logpmf", "pmf"]


def logpmf(k, mu, loc=0):
    """log P(X = k)."""
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -np.inf, log_probs)


def pmf(k, mu, loc=0):
    """P(X = k)."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(X <= k)."""
    k, mu, loc = promote_args_inexact("poisson.cdf", k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, jnp.zeros_like(x), gammaincc(jnp.floor(1 + x), mu))


def _entropy_sum(mu, max_k, upper):
    k = jnp.arange(max_k, dtype=mu.dtype)[:, None]                  # [K, 1]
    probs = pmf(k, mu, 0)                                           # [K, N]
    mask = k < jnp.ceil(upper)[None, :]
    return jnp.sum(entr(jnp.where(mask, probs, 0.0)), axis=0)       # [N]


def entropy(mu, loc=0):
    """The entropy of Poisson(mu) (loc shifts nothing but the result's shape)."""
    check_arraylike("poisson.entropy", mu, loc)
    mu, loc = (jnp.asarray(a) for a in promote_dtypes_inexact(mu, loc))   # Python scalars too
    shape = jnp.broadcast_shapes(mu.shape, loc.shape)
    flat = jnp.ravel(mu)                                            # [N]
    small = _entropy_sum(flat, 35, flat + 20)
    medium = _entropy_sum(flat, 250, flat + 10 * jnp.sqrt(flat) + 20)
    large = 0.5 * jnp.log(2 * np.pi * np.e * flat) - 1.0 / (12 * flat)
    result = jnp.where(flat == 0, jnp.zeros_like(flat),
                       jnp.where(flat < 10, small, jnp.where(flat < 100, medium, large)))
    return jnp.broadcast_to(jnp.reshape(result, mu.shape), shape)
