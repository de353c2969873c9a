"""fnad.scipy.stats.cauchy: the Cauchy distribution, as jax.scipy.stats.cauchy.

    z = (x - loc)/scale
    logpdf(x) = -log(π scale) - log1p(z²)
    cdf(x)    = 1/2 + arctan(z)/π          sf(x) = cdf(-x; -loc, scale)
    ppf(q)    = loc + scale·tan(π q - π/2)  isf(q) = loc + scale·tan(π/2 - π q)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """log of 1 / (π scale (1 + z²))."""
    x, loc, scale = promote_args_inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(jnp.log(np.pi * scale) + jnp.log1p(z * z))


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("cauchy.cdf", x, loc, scale)
    return 0.5 + (1 / np.pi) * jnp.arctan((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    """log cdf(x)."""
    return jnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """P(X > x)."""
    x, loc, scale = promote_args_inexact("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    """log sf(x)."""
    x, loc, scale = promote_args_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def isf(q, loc=0, scale=1):
    """The inverse of sf."""
    q, loc, scale = promote_args_inexact("cauchy.isf", q, loc, scale)
    return jnp.tan(np.pi / 2 - np.pi * q) * scale + loc


def ppf(q, loc=0, scale=1):
    """The inverse of cdf."""
    q, loc, scale = promote_args_inexact("cauchy.ppf", q, loc, scale)
    return jnp.tan(np.pi * q - np.pi / 2) * scale + loc
