"""fnad.scipy.stats: probability distributions, as jax.scipy.stats (the normal one)."""
from fnad.scipy.stats import norm  # noqa: F401
