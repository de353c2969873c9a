"""fnad: composable function transformations (grad, jvp, vjp, vmap, jit) over a typed IR.

`import fnad` loads the core, the primitive rules and the user API; a backend
(and so numba or jax) and `fnad.scipy` load on first use.
"""
from fnad import dtypes, tree, tree_util  # noqa: F401
from fnad.config import (check_tracer_leaks, checking_leaks, config, debug_infs, debug_nans,
                         default_matmul_precision, disable_jit, enable_checks,
                         explain_cache_misses, log_compiles, numpy_dtype_promotion,
                         numpy_rank_promotion, threefry_partitionable)
from fnad.core import (Array, ConcretizationTypeError, NoImplementationError,  # noqa: F401
                       ShapeDtypeStruct, ShapeError, TracerArrayConversionError,
                       TracerBoolConversionError, TracerIntegerConversionError,
                       UnexpectedTracerError)
from fnad import primitives  # noqa: F401
from fnad.ad import grad, jvp, linear_transpose, linearize, value_and_grad, vjp
from fnad.batching import pmap, vmap
from fnad.jacobians import hessian, jacfwd, jacobian, jacrev
from fnad.jit import clear_caches, jit
from fnad.custom import closure_convert, custom_gradient, custom_jvp, custom_vjp
from fnad import custom_batching  # noqa: F401,E402
from fnad.callback import pure_callback
from fnad.devices import (Device, block_until_ready, default_backend, default_device,
                          device_count, device_get, device_put, devices, host_count, host_id,
                          host_ids, local_device_count, local_devices, process_count,
                          process_index, process_indices)
from fnad.remat import checkpoint, checkpoint_policies, remat
from fnad.tracing import (ensure_compile_time_eval, eval_shape, make_jaxpr, named_call,
                          named_scope, typeof)
from fnad import debug, lax, nn, numpy, random  # noqa: F401,E402  (numpy installs Array operators)
from fnad.lax import stop_gradient
from fnad.dtypes import float0
from fnad import dlpack, sharding  # noqa: F401,E402
from fnad.sharding import (NamedSharding, P, make_array_from_callback,  # noqa: E402
                           make_mesh, set_mesh, shard_map)

__version__ = "0.1.0"
__all__ = ["Array", "ShapeDtypeStruct", "block_until_ready", "checkpoint", "checkpoint_policies",
           "clear_caches", "closure_convert", "config", "custom_gradient", "custom_jvp",
           "custom_vjp", "debug_infs", "debug_nans", "default_backend", "default_device",
           "default_matmul_precision", "device_count", "device_get", "device_put", "devices",
           "disable_jit", "ensure_compile_time_eval", "eval_shape", "float0", "grad",
           "hessian", "jacfwd", "jacobian",
           "jacrev", "jit", "jvp", "linear_transpose", "linearize", "local_device_count",
           "local_devices", "log_compiles", "make_jaxpr", "named_call", "named_scope",
           "numpy_dtype_promotion", "numpy_rank_promotion", "pmap", "print_environment_info",
           "pure_callback", "remat",
           "stop_gradient", "typeof", "value_and_grad", "vjp", "vmap"]
__all__ += ["Device", "check_tracer_leaks", "checking_leaks", "enable_checks",
            "explain_cache_misses", "host_count", "host_id", "host_ids", "process_count",
            "process_index", "process_indices", "threefry_partitionable"]
__all__ += ["NamedSharding", "P", "make_array_from_callback", "make_mesh", "set_mesh",
            "shard_map", "effects_barrier", "enable_x64"]


def enable_x64(new_val: bool = True):
    """A context manager turning 64-bit types on (or off, with False) inside its block,
    restored after (jax.enable_x64; also fnad.experimental.enable_x64)."""
    return config.override(jax_enable_x64=bool(new_val))


def effects_barrier() -> None:
    """Wait until the side effects (callbacks, debug prints) of the programs run so far are
    done (jax.effects_barrier). fnad's backends run a program's effects before its call
    returns, so none is ever pending here and this returns at once."""


def __getattr__(name: str):
    """fnad's optional modules (`scipy`, `image`, `flatten_util`, `errors`, `typing`,
    `experimental`, `stages`, `ops`, `example_libraries`, `custom_derivatives`: jax's name
    for fnad.custom's API) load on first use (time that `import fnad` need not pay)."""
    import importlib
    if name in ("scipy", "image", "flatten_util", "errors", "typing", "experimental",
                "stages", "ops", "example_libraries", "custom_derivatives"):
        return importlib.import_module(f"fnad.{name}")
    raise AttributeError(f"module 'fnad' has no attribute {name!r}")


def print_environment_info(return_string: bool = False):
    """The versions of fnad, Python, NumPy, numba and jax (those installed), and the
    backends; printed, or returned with return_string=True."""
    import importlib.metadata
    import platform
    import sys
    lines = [f"fnad:    {__version__}", f"python:  {sys.version.split()[0]}",
             f"system:  {platform.platform()}"]
    for pkg in ("numpy", "numba", "llvmlite", "jax", "jaxlib", "scipy"):
        try:
            lines.append(f"{pkg + ':':<8} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"{pkg + ':':<8} (not installed)")
    lines.append(f"default backend: {default_backend()}")
    text = "\n".join(lines)
    if return_string:
        return text
    print(text)
    return None
