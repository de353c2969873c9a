"""fnad.scipy.stats.vonmises: the von Mises distribution, as jax.scipy.stats.vonmises.

    logpdf(x) = kappa·(cos x - 1) - log(2π·i0e(kappa)), NaN for kappa <= 0
    (i0e(k) = exp(-k)·I0(k), so that large kappa does not overflow)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import promote_args_inexact

__all__ = ["logpdf", "pdf"]


def _i0e(kappa):
    # lax.bessel_i0e is added to fnad.lax separately; looked up at call time so that the
    # package imports without it.
    fn = getattr(lax, "bessel_i0e", None)
    if fn is None:
        raise NotImplementedError("vonmises needs fnad.lax.bessel_i0e, which this build of "
                                  "fnad does not have")
    return fn(kappa)


def logpdf(x, kappa):
    """log density (x is not wrapped to [-π, π], as jax)."""
    x, kappa = promote_args_inexact("vonmises.logpdf", x, kappa)
    val = kappa * (jnp.cos(x) - 1) - jnp.log(2 * np.pi * _i0e(kappa))
    return jnp.where(kappa > 0, val, np.nan)


def pdf(x, kappa):
    """The density."""
    return jnp.exp(logpdf(x, kappa))
