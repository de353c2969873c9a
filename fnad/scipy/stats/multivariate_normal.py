"""fnad.scipy.stats.multivariate_normal: N(mean, cov), as jax.scipy.stats.multivariate_normal.

    scalar mean:  logpdf(x) = -(x - mean)²/(2 cov) - (log 2π + log cov)/2
    vector mean [..., n], scalar cov:
                  logpdf(x) = -|x - mean|²/(2 cov) - n/2·(log 2π + log cov)
    matrix cov [..., n, n] = L Lᵀ (Cholesky):   y = L⁻¹(x - mean)
                  logpdf(x) = -|y|²/2 - n/2·log 2π - Σ log diag L
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import promote_dtypes_inexact

__all__ = ["logpdf", "pdf"]


def _solve_lower(L, b):                                 # L⁻¹ b, L [n, n], b [n]
    return lax.linalg.triangular_solve(L, b[:, None], left_side=True, lower=True)[:, 0]


def logpdf(x, mean, cov, allow_singular=None):
    """log density; x [..., n], mean [..., n] (or scalars), cov [..., n, n] or a scalar."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_dtypes_inexact(x, mean, cov)
    if not mean.shape:
        return (-1 / 2 * jnp.square(x - mean) / cov
                - 1 / 2 * (np.log(2 * np.pi) + jnp.log(cov)))
    n = mean.shape[-1]
    if not np.shape(cov):
        y = x - mean
        return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) / cov
                - n / 2 * (np.log(2 * np.pi) + jnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes: mean "
                         f"{mean.shape}, cov {cov.shape} (cov must be [..., {n}, {n}])")
    L = lax.linalg.cholesky(cov)                                            # [..., n, n]
    y = jnp.vectorize(_solve_lower, signature="(n,n),(n)->(n)")(L, x - mean)  # [..., n]
    return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) - n / 2 * np.log(2 * np.pi)
            - jnp.sum(jnp.log(jnp.diagonal(L, axis1=-1, axis2=-2)), axis=-1))


def pdf(x, mean, cov):
    """The density."""
    return jnp.exp(logpdf(x, mean, cov))
