"""fnad.scipy.stats.wrapcauchy: the wrapped Cauchy distribution on [0, 2π], as
jax.scipy.stats.wrapcauchy.

    logpdf(x) = log(1 - c²) - log 2π - log(1 + c² - 2c·cos x); -inf outside [0, 2π],
                NaN unless 0 < c < 1
"""
from __future__ import annotations

import math

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    """log density."""
    x, c = promote_args_inexact("wrapcauchy.logpdf", x, c)
    val = jnp.log(1 - c * c) - math.log(2 * np.pi) - jnp.log(1 + c * c - 2 * c * jnp.cos(x))
    inside = jnp.where((x >= 0) & (x <= np.pi * 2), val, -np.inf)
    return jnp.where((c > 0) & (c < 1), inside, np.nan)


def pdf(x, c):
    """The density."""
    return jnp.exp(logpdf(x, c))
