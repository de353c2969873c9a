"""fnad.scipy.stats.pareto: the Pareto distribution with shape b, as jax.scipy.stats.pareto.

    z = (x - loc)/scale, support z >= 1
    logpdf(x) = -log(scale/b) - (b + 1)·log z    (-inf below the support)
    cdf(x)    = 1 - z^-b (0 below)     logcdf = log1p(-z^-b) (-inf below)
    logsf(x)  = -b·log z (0 below)     sf = exp(logsf)
    ppf(q)    = loc + scale·(1 - q)^(-1/b), NaN outside [0, 1]
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import promote_args_inexact

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, b, loc=0, scale=1):
    """log density."""
    x, b, loc, scale = promote_args_inexact("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    log_probs = -(jnp.log(scale / b) + (b + 1) * jnp.log(z))
    return jnp.where(x < loc + scale, -np.inf, log_probs)


def pdf(x, b, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    """P(X <= x)."""
    x, b, loc, scale = promote_args_inexact("pareto.cdf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, jnp.zeros_like(x), 1 - lax.pow(z, -b))


def logcdf(x, b, loc=0, scale=1):
    """log P(X <= x)."""
    x, b, loc, scale = promote_args_inexact("pareto.logcdf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, -np.inf, jnp.log1p(-lax.pow(z, -b)))


def logsf(x, b, loc=0, scale=1):
    """log P(X > x)."""
    x, b, loc, scale = promote_args_inexact("pareto.logsf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(x < loc + scale, jnp.zeros_like(x), -(b * jnp.log(z)))


def sf(x, b, loc=0, scale=1):
    """P(X > x)."""
    return jnp.exp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
    """The inverse of cdf."""
    q, b, loc, scale = promote_args_inexact("pareto.ppf", q, b, loc, scale)
    val = loc + scale * lax.pow(1 - q, -(1 / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, val)
