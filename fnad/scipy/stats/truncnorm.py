"""fnad.scipy.stats.truncnorm: the normal distribution truncated to [a, b] (in standard
units: x ∈ [loc + a·scale, loc + b·scale]), as jax.scipy.stats.truncnorm.

    log mass M(a, b) = log(Φ(b) - Φ(a)): from log Φ in the tails (mirrored for a > 0),
                       log1p(-Φ(a) - Φ(-b)) when a <= 0 < b
    logpdf(x) = norm.logpdf(x; loc, scale) - M(a, b); -inf outside, NaN for a >= b
    logcdf(x) = M(a, z) - M(a, b), or log1p(-exp(M(z, b) - M(a, b))) where that is > -0.1;
                0 at z >= b, -inf at z <= a        logsf(x) = logcdf(-x; -b, -a, -loc, scale)
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy.special import log_ndtr, logsumexp, ndtr
from fnad.scipy.stats import norm

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_diff(x, y):                                    # log(exp x - exp y)
    return logsumexp(jnp.array([x, y]), b=jnp.array([jnp.ones_like(x), -jnp.ones_like(y)]),
                     axis=0)


def _log_gauss_mass(a, b):
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    case_left = b <= 0
    case_right = a > 0
    case_central = ~(case_left | case_right)
    a_tail = jnp.where(case_right, -b, a)
    b_tail = jnp.where(case_right, -a, b)
    mass_tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    mass_central = jnp.log1p(-ndtr(a) - ndtr(-b))
    return jnp.where(case_central, mass_central, mass_tail)


def logpdf(x, a, b, loc=0, scale=1):
    """log density."""
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    val = jnp.where((z < a) | (z > b), -np.inf, val)
    return jnp.where(a >= b, np.nan, val)


def pdf(x, a, b, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    """log P(X > x)."""
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
    """P(X > x)."""
    return jnp.exp(logsf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    """log P(X <= x)."""
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    lgm_ab = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, z) - lgm_ab
    log_sf = _log_gauss_mass(z, b) - lgm_ab
    log_cdf = jnp.select([z >= b, z <= a, log_cdf > -0.1, z > a],
                         [jnp.zeros_like(z), jnp.full_like(z, -np.inf),
                          jnp.log1p(-jnp.exp(log_sf)), log_cdf])
    return jnp.where(a >= b, np.nan, log_cdf)


def cdf(x, a, b, loc=0, scale=1):
    """P(X <= x)."""
    return jnp.exp(logcdf(x, a, b, loc, scale))
