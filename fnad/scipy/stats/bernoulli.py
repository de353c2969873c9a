"""fnad.scipy.stats.bernoulli: P(X = 1) = p, P(X = 0) = 1 - p, as jax.scipy.stats.bernoulli.

    logpmf(k) = xlogy(k, p) + xlog1py(1 - k, -p) for 0 <= k - loc <= 1, else -inf
    cdf(k)    = 0 (k < 0), 1 - p (0 <= k < 1), 1 (k >= 1); NaN for NaN k or p outside [0, 1]
    ppf(q)    = 0 where q <= 1 - p, else 1; NaN outside [0, 1]
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import xlog1py, xlogy

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k, p, loc=0):
    """log P(X = k); -inf off {loc, loc + 1} (non-integer k inside is not masked, as jax)."""
    k, p, loc = promote_args_inexact("bernoulli.logpmf", k, p, loc)
    x = k - loc
    log_probs = xlogy(x, p) + xlog1py(1 - x, -p)
    return jnp.where((x < 0) | (x > 1), -np.inf, log_probs)


def pmf(k, p, loc=0):
    """P(X = k)."""
    return jnp.exp(logpmf(k, p, loc))


def _bad_p(p):
    return jnp.isnan(p) | (p < 0) | (p > 1)


def cdf(k, p):
    """P(X <= k)."""
    k, p = promote_args_inexact("bernoulli.cdf", k, p)
    conds = [jnp.isnan(k) | _bad_p(p), k < 0, (k >= 0) & (k < 1), k >= 1]
    return jnp.select(conds, [np.nan, jnp.zeros_like(k), 1 - p, jnp.ones_like(k)])


def ppf(q, p):
    """The smallest k in {0, 1} with cdf(k) >= q."""
    q, p = promote_args_inexact("bernoulli.ppf", q, p)
    bad = jnp.isnan(q) | _bad_p(p) | (q < 0) | (q > 1)
    return jnp.where(bad, np.nan, jnp.where(q <= 1 - p, jnp.zeros_like(q), jnp.ones_like(q)))
