"""fnad.scipy.stats.chi2: the chi-squared distribution with df degrees of freedom, as
jax.scipy.stats.chi2.

    y = (x - loc)/scale
    logpdf(x) = (df/2 - 1)·log y - y/2 - lgamma(df/2) - df/2·log 2 - log scale; -inf for x < loc
    cdf(x)    = gammainc(df/2, clip(y/2, 0, inf))      sf(x) = gammaincc(df/2, clip(y/2, 0, inf))
"""
from __future__ import annotations

import math

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.scipy.stats._util import clamp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import gammainc, gammaincc

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, df, loc=0, scale=1):
    """log density."""
    x, df, loc, scale = promote_args_inexact("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    kernel = (half_df - 1) * jnp.log(y) - y / 2
    nrml_cnst = -(lax.lgamma(half_df) + math.log(2.0) * df / 2)    # a weak constant
    return jnp.where(x < loc, -np.inf, nrml_cnst - jnp.log(scale) + kernel)


def pdf(x, df, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, df, loc, scale))


def _half_y(name, x, df, loc, scale):
    x, df, loc, scale = promote_args_inexact(name, x, df, loc, scale)
    return df / 2, clamp(0.0, (x - loc) / (scale * 2), np.inf)


def cdf(x, df, loc=0, scale=1):
    """P(X <= x)."""
    return gammainc(*_half_y("chi2.cdf", x, df, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    """log cdf(x)."""
    return jnp.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    """P(X > x)."""
    return gammaincc(*_half_y("chi2.sf", x, df, loc, scale))


def logsf(x, df, loc=0, scale=1):
    """log sf(x)."""
    return jnp.log(sf(x, df, loc, scale))
