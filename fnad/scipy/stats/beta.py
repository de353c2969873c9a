"""fnad.scipy.stats.beta: the beta distribution on [loc, loc + scale], as
jax.scipy.stats.beta.

    y = (x - loc)/scale
    logpdf(x) = xlogy(a - 1, y) + xlog1py(b - 1, -y) - betaln(a, b) - log scale;
                -inf outside [loc, loc + scale], NaN for a <= 0, b <= 0 or scale <= 0
    cdf(x)    = betainc(a, b, clip(y, 0, 1))        sf(x) = betainc(b, a, 1 - clip(y, 0, 1))
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad.scipy.stats._util import clamp
from fnad.numpy._core import promote_args_inexact
from fnad.scipy import special
from fnad.scipy.special import betaln, xlog1py, xlogy

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x, a, b, loc=0, scale=1):
    """log density."""
    x, a, b, loc, scale = promote_args_inexact("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    log_probs = (-betaln(a, b) + (xlogy(a - 1, y) + xlog1py(b - 1, -y))) - jnp.log(scale)
    result = jnp.where((x > loc + scale) | (x < loc), -np.inf, log_probs)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, result)


def pdf(x, a, b, loc=0, scale=1):
    """The density."""
    return jnp.exp(logpdf(x, a, b, loc, scale))


def _betainc(a, b, x):
    # The regularized incomplete beta function comes from fnad.scipy.special (added there
    # separately); looked up at call time so that the rest of this module works without it.
    fn = getattr(special, "betainc", None)
    if fn is None:
        raise NotImplementedError("beta.cdf/sf need fnad.scipy.special.betainc, which this "
                                  "build of fnad does not have")
    return fn(a, b, x)


def cdf(x, a, b, loc=0, scale=1):
    """P(X <= x)."""
    x, a, b, loc, scale = promote_args_inexact("beta.cdf", x, a, b, loc, scale)
    return _betainc(a, b, clamp(0.0, (x - loc) / scale, 1.0))


def logcdf(x, a, b, loc=0, scale=1):
    """log cdf(x)."""
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """P(X > x)."""
    x, a, b, loc, scale = promote_args_inexact("beta.sf", x, a, b, loc, scale)
    return _betainc(b, a, 1 - clamp(0.0, (x - loc) / scale, 1.0))


def logsf(x, a, b, loc=0, scale=1):
    """log sf(x)."""
    return jnp.log(sf(x, a, b, loc, scale))
