"""fnad: composable function transformations (grad, jvp, vjp, vmap, jit) over a typed IR.

`import fnad` loads the core, the primitive rules and the user API; a backend
(and so numba or jax) loads on first use.
"""
from fnad import (  # noqa: F401
                       dtypes,
                       primitives,  # noqa: F401  (registers every primitive's rules)
                       tree,
                       tree_util,
)
from fnad.ad import grad, jvp, linearize, value_and_grad, vjp
from fnad.config import config
from fnad.core import (  # noqa: F401
                       Array,
                       ConcretizationTypeError,
                       NoImplementationError,
                       ShapeDtypeStruct,
                       ShapeError,
                       TracerArrayConversionError,
                       TracerBoolConversionError,
                       TracerIntegerConversionError,
                       UnexpectedTracerError,
)
from fnad.tracing import eval_shape, make_jaxpr

__version__ = "0.1.0"
__all__ = ["Array", "ShapeDtypeStruct", "config", "eval_shape", "grad", "jvp", "linearize",
           "make_jaxpr", "value_and_grad", "vjp"]
