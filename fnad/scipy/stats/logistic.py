"""fnad.scipy.stats.logistic: the logistic distribution, as jax.scipy.stats.logistic.

    z = (x - loc)/scale
    logpdf(x) = -2·logaddexp(z/2, -z/2) - log scale
    cdf(x) = expit(z)                 sf(x)  = expit(-z)
    ppf(q) = loc + scale·logit(q)     isf(q) = loc - scale·logit(q)
"""
from __future__ import annotations

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import expit, logit

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x, loc=0, scale=1):
    """log density."""
    x, loc, scale = promote_args_inexact("logistic.logpdf", x, loc, scale)
    half_z = (x - loc) / scale / 2
    return -2 * jnp.logaddexp(half_z, -half_z) - jnp.log(scale)


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def ppf(x, loc=0, scale=1):
    """The inverse of cdf."""
    x, loc, scale = promote_args_inexact("logistic.ppf", x, loc, scale)
    return logit(x) * scale + loc


def sf(x, loc=0, scale=1):
    """P(X > x)."""
    x, loc, scale = promote_args_inexact("logistic.sf", x, loc, scale)
    return expit(-((x - loc) / scale))


def isf(x, loc=0, scale=1):
    """The inverse of sf."""
    x, loc, scale = promote_args_inexact("logistic.isf", x, loc, scale)
    return -logit(x) * scale + loc


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("logistic.cdf", x, loc, scale)
    return expit((x - loc) / scale)
