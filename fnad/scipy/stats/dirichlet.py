"""fnad.scipy.stats.dirichlet: the Dirichlet distribution, as jax.scipy.stats.dirichlet.

    logpdf(x) = Σ_i xlogy(alpha_i - 1, x_i) - (Σ_i lgamma(alpha_i) - lgamma(Σ_i alpha_i)),
                -inf off the simplex (some x_i <= 0 or |Σ x - 1| >= 1e-6)
    x [K, ...] or [K-1, ...] (the last component is then 1 - Σ x), alpha [K].
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_dtypes_inexact
from fnad.scipy.special import gammaln, xlogy

__all__ = ["logpdf", "pdf"]


def _is_simplex(x):
    return jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)


def logpdf(x, alpha):
    """log density; x [K or K-1, ...], alpha [K] -> [...]."""
    x, alpha = promote_dtypes_inexact(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, 1 - jnp.sum(x, axis=0, keepdims=True)], axis=0)  # [K, ...]
    normalize_term = jnp.sum(gammaln(alpha)) - gammaln(jnp.sum(alpha))
    alpha = jnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))                # [K, 1...]
    log_probs = jnp.sum(xlogy(alpha - 1, x), axis=0) - normalize_term
    return jnp.where(_is_simplex(x), log_probs, -np.inf)


def pdf(x, alpha):
    """The density."""
    return jnp.exp(logpdf(x, alpha))
