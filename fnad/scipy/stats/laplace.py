"""fnad.scipy.stats.laplace: the Laplace distribution, as jax.scipy.stats.laplace.

    z = (x - loc)/scale
    logpdf(x) = -|z| - log(2 scale)
    cdf(x)    = exp(z)/2 for z <= 0, 1 - exp(-z)/2 otherwise
"""
from __future__ import annotations

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, loc=0, scale=1):
    """log density."""
    x, loc, scale = promote_args_inexact("laplace.logpdf", x, loc, scale)
    return -(jnp.abs(x - loc) / scale + jnp.log(2 * scale))


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z <= 0, 0.5 * jnp.exp(z), 1 - 0.5 * jnp.exp(-z))
