"""fnad: composable function transformations (grad, jvp, vjp, vmap, jit) over a typed IR.

`import fnad` loads the core, the primitive rules and the user API; a backend
(and so numba or jax) loads on first use.
"""
from fnad import dtypes, tree, tree_util  # noqa: F401
from fnad.config import config
from fnad.core import (Array, ConcretizationTypeError, NoImplementationError,  # noqa: F401
                       ShapeDtypeStruct, ShapeError, TracerArrayConversionError,
                       TracerBoolConversionError, TracerIntegerConversionError,
                       UnexpectedTracerError)
from fnad import primitives  # noqa: F401
from fnad.ad import grad, jvp, linearize, value_and_grad, vjp
from fnad.batching import vmap
from fnad.tracing import eval_shape, make_jaxpr
from fnad import lax, nn, numpy, random  # noqa: F401,E402  (numpy installs Array operators)

__version__ = "0.1.0"
__all__ = ["Array", "ShapeDtypeStruct", "config", "eval_shape", "grad", "jvp", "linearize",
           "make_jaxpr", "value_and_grad", "vjp", "vmap"]
