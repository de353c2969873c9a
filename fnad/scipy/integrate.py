"""fnad.scipy.integrate: jax.scipy.integrate's `trapezoid`, fnad.numpy.trapezoid re-exported
(the integral of y along `axis` by the trapezoidal rule, at sample points x or spacing dx)."""
from fnad.numpy import trapezoid

__all__ = ["trapezoid"]
