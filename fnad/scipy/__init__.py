"""fnad.scipy: jax.scipy's special functions (`special`) and distributions (`stats.norm`).

Composed from fnad.lax and fnad.numpy; SciPy itself is not imported. `import fnad` does
not load this package: the first `fnad.scipy` attribute access or import does.
"""
from fnad.scipy import special, stats  # noqa: F401
