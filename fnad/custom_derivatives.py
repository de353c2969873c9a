"""fnad.custom_derivatives: jax.custom_derivatives' names for fnad.custom's objects, so
`from fnad.custom_derivatives import custom_jvp` works as with jax."""
from fnad.custom import (SymbolicZero, closure_convert, custom_gradient,  # noqa: F401
                         custom_jvp, custom_jvp_call_p, custom_vjp, custom_vjp_call_p)

__all__ = ["SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp",
           "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p"]
