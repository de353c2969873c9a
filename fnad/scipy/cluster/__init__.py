"""fnad.scipy.cluster: jax.scipy.cluster (`vq.vq`: nearest code-book entries)."""
from fnad.scipy.cluster import vq  # noqa: F401
