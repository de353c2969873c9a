"""fnad.experimental: jax.experimental's modules that fnad has (`ode.odeint`, `checkify`,
`sparse` with BCOO and BCSR, `shard_map`, `pjit`, `mesh_utils`, `multihost_utils`, `jet`),
`io_callback` (fnad/callback.py) and the `enable_x64` /
`disable_x64` context managers. As in jax, import a module to use it
(`from fnad.experimental import sparse`)."""
from fnad import enable_x64  # noqa: F401  (the same context manager as fnad.enable_x64)
from fnad.callback import io_callback


def disable_x64():
    """64-bit types off inside the block; restored after."""
    return enable_x64(False)


__all__ = ["disable_x64", "enable_x64", "io_callback"]
