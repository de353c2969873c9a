"""fnad.scipy.stats.t: Student's t distribution with df degrees of freedom, as
jax.scipy.stats.t (logpdf and pdf only, as jax).

    z = (x - loc)/scale
    logpdf(x) = lgamma((df+1)/2) - lgamma(df/2) - log(π df scale²)/2 - (df+1)/2·log1p(z²/df)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    """log density."""
    x, df, loc, scale = promote_args_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2
    half_df_plus_half = half_df + 0.5
    normalize_term = (lax.lgamma(half_df) + jnp.log(scale * scale * np.pi * df) / 2
                      - lax.lgamma(half_df_plus_half))
    return -(normalize_term + half_df_plus_half * jnp.log1p(z * z / df))


def pdf(x, df, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, df, loc, scale))
