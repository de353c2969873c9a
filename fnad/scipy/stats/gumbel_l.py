"""fnad.scipy.stats.gumbel_l: the left-skewed Gumbel distribution, as
jax.scipy.stats.gumbel_l. NaN wherever scale <= 0.

    z = (x - loc)/scale
    logpdf(x) = -log scale + z - exp(z)
    logcdf(x) = log(-expm1(-exp(z)))        logsf(x) = -exp(z)
    ppf(p)    = loc + scale·log(-log1p(-p)), NaN outside (0, 1)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import xlog1py, xlogy

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _z(name, x, loc, scale):
    x, loc, scale = promote_args_inexact(name, x, loc, scale)
    return (x - loc) / scale, scale, scale > 0


def logpdf(x, loc=0, scale=1):
    """log density."""
    z, scale, ok = _z("gumbel_l.logpdf", x, loc, scale)
    return jnp.where(ok, xlogy(-1.0, scale) + (z - jnp.exp(z)), np.nan)


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """log P(X <= x)."""
    z, scale, ok = _z("gumbel_l.logcdf", x, loc, scale)
    return jnp.where(ok, jnp.log(-jnp.expm1(-jnp.exp(z))), np.nan)


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    return jnp.exp(logcdf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    """The inverse of cdf."""
    p, loc, scale = promote_args_inexact("gumbel_l.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    return jnp.where(ok, loc + scale * jnp.log(xlog1py(-1.0, -p)), np.nan)


def sf(x, loc=0, scale=1):
    """P(X > x)."""
    return jnp.exp(logsf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    z, scale, ok = _z("gumbel_l.logsf", x, loc, scale)
    return jnp.where(ok, -jnp.exp(z), np.nan)
