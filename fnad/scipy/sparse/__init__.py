"""fnad.scipy.sparse: jax.scipy.sparse's iterative solvers (`linalg`)."""
from fnad.scipy.sparse import linalg  # noqa: F401
