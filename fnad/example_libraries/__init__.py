"""fnad.example_libraries: jax.example_libraries' two small libraries, `optimizers`
(optimizers as (init_fn, update_fn, params_fn) triples over pytrees, step-size schedules)
and `stax` (layers as (init_fun, apply_fun) pairs, combined with `serial`/`parallel`).

Both are compositions of fnad.numpy, fnad.lax, fnad.random and fnad.nn, so grad, vmap and
jit work through them with no primitives of their own. As in JAX, they are examples;
fnad.optim is the fuller optimizer library.
"""
from fnad.example_libraries import optimizers, stax  # noqa: F401
