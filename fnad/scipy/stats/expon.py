"""fnad.scipy.stats.expon: the exponential distribution, as jax.scipy.stats.expon.

    z = (x - loc)/scale
    logpdf(x) = -z - log scale (-inf for x < loc)     logsf(x) = -z (0 for x < loc)
    cdf(x)    = -expm1(-z) (0 for x < loc)            sf = exp(logsf), logcdf = log1p(-sf)
    ppf(q)    = loc - scale·log1p(-q), NaN for q outside [0, 1]
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """log density."""
    x, loc, scale = promote_args_inexact("expon.logpdf", x, loc, scale)
    log_probs = -((x - loc) / scale + jnp.log(scale))
    return jnp.where(x < loc, -np.inf, log_probs)


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("expon.cdf", x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), -jnp.expm1(neg_z))


def logcdf(x, loc=0, scale=1):
    """log cdf(x) = log1p(-sf(x))."""
    return jnp.log1p(-sf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    x, loc, scale = promote_args_inexact("expon.sf", x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), neg_z)


def sf(x, loc=0, scale=1):
    """P(X > x)."""
    return jnp.exp(logsf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    """The inverse of cdf."""
    q, loc, scale = promote_args_inexact("expon.ppf", q, loc, scale)
    bad = jnp.isnan(q) | (q < 0) | (q > 1)
    return jnp.where(bad, np.nan, loc - scale * jnp.log1p(-q))
