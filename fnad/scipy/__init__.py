"""fnad.scipy: jax.scipy's special functions (`special`), distributions (`stats`), `linalg`,
iterative linear solvers (`sparse.linalg`: cg, bicgstab, gmres), `signal` (convolutions,
fftconvolve, detrend, stft, istft, csd, welch), `fft` (dct, idct, dctn, idctn),
`optimize.minimize` (BFGS, L-BFGS), `integrate.trapezoid`,
`interpolate.RegularGridInterpolator`, `cluster.vq.vq`, `spatial.transform` (Rotation,
Slerp) and `ndimage.map_coordinates`.

Composed from fnad.lax and fnad.numpy; SciPy itself is not imported. `import fnad` does
not load this package: the first `fnad.scipy` attribute access or import does.
"""
from fnad.scipy import ndimage, signal, sparse, special, stats  # noqa: F401
from fnad.scipy import linalg  # noqa: F401
from fnad.scipy import cluster, fft, integrate, interpolate, optimize, spatial  # noqa: F401
