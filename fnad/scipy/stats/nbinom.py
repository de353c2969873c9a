"""fnad.scipy.stats.nbinom: the negative binomial distribution, as jax.scipy.stats.nbinom.

    y = k - loc
    logpmf(k) = lgamma(y + n) - lgamma(n) - lgamma(y + 1) + xlogy(n, p) + xlogy(y, 1 - p),
                -inf for k < loc (k is not rounded, as jax)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import gammaln, xlogy

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    """log P(X = k)."""
    k, n, p, loc = promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    comb_term = gammaln(y + n) - gammaln(n) - gammaln(y + 1)
    log_linear_term = xlogy(n, p) + xlogy(y, 1 - p)
    return jnp.where(k < loc, -np.inf, comb_term + log_linear_term)


def pmf(k, n, p, loc=0):
    """P(X = k)."""
    return jnp.exp(logpmf(k, n, p, loc))
