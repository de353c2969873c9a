"""fnad.scipy.spatial: jax.scipy.spatial's 3-d rotations (`transform.Rotation`, `Slerp`)."""
from fnad.scipy.spatial import transform  # noqa: F401
