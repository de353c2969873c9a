"""fnad.scipy.stats.binom: the binomial distribution B(n, p), as jax.scipy.stats.binom.

    logpmf(k) = lgamma(n+1) - lgamma(y+1) - lgamma(n-y+1) + xlogy(y, p) + xlog1py(n-y, -p),
                y = k - loc; 0 where y = n = 0 or where the linear term is 0 (p = 0 or 1 at
                the certain end); -inf outside loc <= k < loc + n + 1 (k is not rounded)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import gammaln, xlog1py, xlogy

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """log P(X = k)."""
    k, n, p, loc = promote_args_inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    comb_term = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    log_linear_term = xlogy(y, p) + xlog1py(n - y, -p)
    log_probs = comb_term + log_linear_term
    certain = ((y == 0) & (n == 0)) | (log_linear_term == 0)
    log_probs = jnp.where(certain, 0.0, log_probs)
    return jnp.where((k >= loc) & (k < loc + n + 1), log_probs, -np.inf)


def pmf(k, n, p, loc=0):
    """P(X = k)."""
    return jnp.exp(logpmf(k, n, p, loc))
