"""fnad.scipy.stats.betabinom: the beta-binomial distribution, as jax.scipy.stats.betabinom.

    y = floor(k) - loc
    logpmf(k) = -log1p(n) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b)
                0 where y = n = 0; -inf for y < -loc, y > n or y + a <= 0;
                NaN for n < 0, a <= 0 or b <= 0
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import betaln

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0):
    """log P(X = k)."""
    k, n, a, b, loc = promote_args_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = jnp.floor(k) - loc
    combiln = -(jnp.log1p(n) + betaln(n - y + 1, y + 1))
    beta_lns = betaln(y + a, n - y + b) - betaln(a, b)
    log_probs = combiln + beta_lns
    log_probs = jnp.where((y == 0) & (n == 0), 0.0, log_probs)
    log_probs = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, log_probs)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, log_probs)


def pmf(k, n, a, b, loc=0):
    """P(X = k)."""
    return jnp.exp(logpmf(k, n, a, b, loc))
