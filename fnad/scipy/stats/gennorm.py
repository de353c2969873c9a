"""fnad.scipy.stats.gennorm: the generalized normal distribution with shape beta, as
jax.scipy.stats.gennorm (standard location and scale only).

    logpdf(x) = log(beta/2) - lgamma(1/beta) - |x|^beta
    cdf(x)    = (1 + sign(x)·igamma(1/beta, |x|^beta)) / 2
"""
from __future__ import annotations

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x, beta):
    """log density."""
    x, beta = promote_args_inexact("gennorm.logpdf", x, beta)
    return jnp.log(0.5 * beta) - lax.lgamma(1 / beta) - jnp.abs(x) ** beta


def cdf(x, beta):
    """P(X <= x)."""
    x, beta = promote_args_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1 + jnp.sign(x) * lax.igamma(1 / beta, jnp.abs(x) ** beta))


def pdf(x, beta):
    """The density."""
    return jnp.exp(logpdf(x, beta))
