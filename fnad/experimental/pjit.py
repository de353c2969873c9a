"""fnad.experimental.pjit: jax.experimental.pjit's `pjit`, which is `fnad.jit` with
`in_shardings` / `out_shardings` (fnad runs on one device: they are checked and every
sharding is the whole array)."""
from fnad.jit import jit as _jit

__all__ = ["pjit"]


def pjit(fun=None, in_shardings=None, out_shardings=None, static_argnums=None,
         static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
         device=None, backend=None, inline=False, compiler_options=None):
    """`fun` compiled as `fnad.jit(fun, in_shardings, out_shardings, ...)` would."""
    return _jit(fun, in_shardings, out_shardings, static_argnums=static_argnums,
                static_argnames=static_argnames, donate_argnums=donate_argnums,
                donate_argnames=donate_argnames, keep_unused=keep_unused, device=device,
                backend=backend, inline=inline, compiler_options=compiler_options)
