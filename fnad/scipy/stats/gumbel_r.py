"""fnad.scipy.stats.gumbel_r: the right-skewed Gumbel distribution, as
jax.scipy.stats.gumbel_r. NaN wherever scale <= 0.

    z = (x - loc)/scale
    logpdf(x) = -log scale - z - exp(-z)
    logcdf(x) = -exp(-z)                    sf(x) = 1 - exp(-exp(-z))
    logsf(x)  = log1mexp(exp(-z))           ppf(p) = loc - scale·log(-log p), NaN outside (0, 1)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.nn import log1mexp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import xlogy

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _neg_z(name, x, loc, scale):
    x, loc, scale = promote_args_inexact(name, x, loc, scale)
    return (loc - x) / scale, scale, scale > 0


def logpdf(x, loc=0, scale=1):
    """log density."""
    x, loc, scale = promote_args_inexact("gumbel_r.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(scale > 0, xlogy(-1.0, scale) - (z + jnp.exp(-z)), np.nan)


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """log P(X <= x)."""
    x, loc, scale = promote_args_inexact("gumbel_r.logcdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(scale > 0, -jnp.exp(-z), np.nan)


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    return jnp.exp(logcdf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    """The inverse of cdf."""
    p, loc, scale = promote_args_inexact("gumbel_r.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    return jnp.where(ok, loc - scale * jnp.log(xlogy(-1.0, p)), np.nan)


def sf(x, loc=0, scale=1):
    """P(X > x)."""
    neg_z, scale, ok = _neg_z("gumbel_r.sf", x, loc, scale)
    return jnp.where(ok, 1 - jnp.exp(-jnp.exp(neg_z)), np.nan)


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    neg_z, scale, ok = _neg_z("gumbel_r.logsf", x, loc, scale)
    return jnp.where(ok, log1mexp(jnp.exp(neg_z)), np.nan)
