"""fnad.scipy.stats.geom: the geometric distribution on {1, 2, ...}, as jax.scipy.stats.geom.

    logpmf(k) = xlog1py(k - loc - 1, -p) + log p for k - loc > 0, else -inf
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import xlog1py

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0):
    """log P(X = k) (k is not rounded, as jax)."""
    k, p, loc = promote_args_inexact("geom.logpmf", k, p, loc)
    x = k - loc
    log_probs = xlog1py(x - 1, -p) + jnp.log(p)
    return jnp.where(x <= 0, -np.inf, log_probs)


def pmf(k, p, loc=0):
    """P(X = k)."""
    return jnp.exp(logpmf(k, p, loc))
