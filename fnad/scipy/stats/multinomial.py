"""fnad.scipy.stats.multinomial: the multinomial distribution, as
jax.scipy.stats.multinomial. x (the counts, last axis) and n must be integers.

    logpmf(x) = lgamma(n + 1) + Σ_i (xlogy(x_i, p_i) - lgamma(x_i + 1)); -inf unless Σ x = n
    (jax sums x over every axis for that check, and so does fnad)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact, promote_args_numeric
from fnad.scipy.special import gammaln, xlogy

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    """log P(X = x); x [..., K] counts, p [..., K] probabilities, n the number of trials."""
    p, = promote_args_inexact("multinomial.logpmf", p)
    x, n = promote_args_numeric("multinomial.logpmf", x, n)
    if not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    logprobs = gammaln(n + 1) + jnp.sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    return jnp.where(jnp.equal(jnp.sum(x), n), logprobs, -np.inf)


def pmf(x, n, p):
    """P(X = x)."""
    return jnp.exp(logpmf(x, n, p))
