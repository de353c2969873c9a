"""fnad.scipy: jax.scipy's special functions (`special`), distributions (`stats`),
iterative linear solvers (`sparse.linalg`: cg, bicgstab, gmres), `signal` (convolutions,
fftconvolve, detrend) and `ndimage.map_coordinates`.

Composed from fnad.lax and fnad.numpy; SciPy itself is not imported. `import fnad` does
not load this package: the first `fnad.scipy` attribute access or import does.
"""
from fnad.scipy import ndimage, signal, sparse, special, stats  # noqa: F401
from fnad.scipy import linalg  # noqa: F401
