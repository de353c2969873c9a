"""fnad.scipy.stats.gamma: the gamma distribution with shape a, as jax.scipy.stats.gamma.

    y = (x - loc)/scale (1 where x < loc, so that the masked branch has finite derivatives)
    logpdf(x) = xlogy(a - 1, y) - y - lgamma(a) - log scale; -inf for x < loc
    cdf(x)    = gammainc(a, clip(y, 0, inf))     sf(x) = gammaincc(a, y), 1 for y < 0
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.scipy.stats._util import clamp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import gammainc, gammaincc, gammaln, xlogy

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, a, loc=0, scale=1):
    """log density."""
    x, a, loc, scale = promote_args_inexact("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    y = jnp.where(ok, (x - loc) / scale, jnp.ones_like(x))
    log_probs = (xlogy(a - 1, y) - y) - (gammaln(a) + jnp.log(scale))
    return jnp.where(ok, log_probs, -np.inf)


def pdf(x, a, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    """P(X <= x)."""
    x, a, loc, scale = promote_args_inexact("gamma.cdf", x, a, loc, scale)
    return gammainc(a, clamp(0.0, (x - loc) / scale, np.inf))


def logcdf(x, a, loc=0, scale=1):
    """log cdf(x)."""
    return jnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    """P(X > x)."""
    x, a, loc, scale = promote_args_inexact("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < 0, 1, gammaincc(a, y))


def logsf(x, a, loc=0, scale=1):
    """log sf(x)."""
    return jnp.log(sf(x, a, loc, scale))
