"""fnad.scipy.stats: probability distributions and summary statistics, as jax.scipy.stats.

One module per distribution (logpdf/pdf/cdf/... with jax's names, signatures, broadcasting
and edge values), `mode`, `rankdata`, `sem` and the `gaussian_kde` class.
"""
from fnad.scipy.stats import (  # noqa: F401
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from fnad.scipy.stats._core import mode, rankdata, sem  # noqa: F401
from fnad.scipy.stats.kde import gaussian_kde  # noqa: F401
