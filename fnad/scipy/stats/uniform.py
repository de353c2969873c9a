"""fnad.scipy.stats.uniform: the uniform distribution on [loc, loc + scale], as
jax.scipy.stats.uniform.

    logpdf(x) = -log scale inside, -inf outside
    cdf(x)    = 0 below, 1 above, (x - loc)/scale inside (NaN for NaN x)
    ppf(q)    = loc + scale·q, NaN outside [0, 1]
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    """log density."""
    x, loc, scale = promote_args_inexact("uniform.logpdf", x, loc, scale)
    return jnp.where((x > loc + scale) | (x < loc), -np.inf, -jnp.log(scale))


def pdf(x, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x)."""
    x, loc, scale = promote_args_inexact("uniform.cdf", x, loc, scale)
    hi = loc + scale
    conds = [x < loc, x > hi, (x >= loc) & (x <= hi)]
    dtype = jnp.asarray(x).dtype
    zero, one = np.zeros((), dtype), np.ones((), dtype)         # strong, as jax's
    return jnp.select(conds, [zero, one, (x - loc) / scale])


def ppf(q, loc=0, scale=1):
    """The inverse of cdf."""
    q, loc, scale = promote_args_inexact("uniform.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
