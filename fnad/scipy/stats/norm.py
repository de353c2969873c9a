"""fnad.scipy.stats.norm: the normal distribution N(loc, scale²), as jax.scipy.stats.norm.

    logpdf(x) = -(log(2π scale²) + ((x - loc)/scale)²) / 2      pdf = exp(logpdf)
    cdf(x)    = ndtr((x - loc)/scale)                           logcdf = log_ndtr(...)
    sf(x)     = cdf(-x; -loc, scale)                            logsf  = logcdf(-x; -loc, scale)
    ppf(q)    = ndtri(q)·scale + loc                            isf(q) = ppf(1 - q)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes
from fnad.numpy._core import promote_args_inexact
from fnad.scipy import special

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """log of the density exp(-((x - loc)/scale)²/2) / (√(2π) scale)."""
    x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
    scale_sq = jnp.square(scale)
    log_normalizer = jnp.log(jnp.multiply(2 * np.pi, scale_sq))
    quadratic = jnp.true_divide(jnp.square(jnp.subtract(x, loc)), scale_sq)
    return jnp.true_divide(jnp.add(log_normalizer, quadratic), -2)


def pdf(x, loc=0, scale=1):
    """The density exp(logpdf(x))."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
    return special.ndtr(jnp.true_divide(jnp.subtract(x, loc), scale))


def logcdf(x, loc=0, scale=1):
    """log P(X <= x), accurate in both tails."""
    x, loc, scale = promote_args_inexact("norm.logcdf", x, loc, scale)
    return special.log_ndtr(jnp.true_divide(jnp.subtract(x, loc), scale))


def sf(x, loc=0, scale=1):
    """P(X > x) = 1 - cdf(x), accurate where cdf(x) is close to 1."""
    x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
    return cdf(jnp.negative(x), jnp.negative(loc), scale)


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    x, loc, scale = promote_args_inexact("norm.logsf", x, loc, scale)
    return logcdf(jnp.negative(x), jnp.negative(loc), scale)


def ppf(q, loc=0, scale=1):
    """The quantile function, the inverse of cdf, in the default float dtype (as jax)."""
    out = jnp.add(jnp.multiply(special.ndtri(q), scale), loc)
    return jnp.asarray(out, dtypes.default_float_dtype())


def isf(q, loc=0, scale=1):
    """The inverse of sf: ppf(1 - q)."""
    return ppf(jnp.subtract(1, q), loc, scale)
