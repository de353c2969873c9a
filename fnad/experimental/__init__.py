"""fnad.experimental: jax.experimental's modules that fnad has (`ode.odeint`, `checkify`,
`sparse` with BCOO and BCSR, `shard_map`, `pjit`, `mesh_utils`, `multihost_utils`),
`io_callback` (fnad/callback.py) and the `enable_x64` /
`disable_x64` context managers. As in jax, import a module to use it
(`from fnad.experimental import sparse`)."""
import contextlib as _contextlib

from fnad.callback import io_callback


@_contextlib.contextmanager
def enable_x64(new_val: bool = True):
    """64-bit types on (or, with False, off) inside the block; restored after."""
    from fnad.config import config
    with config.override(jax_enable_x64=bool(new_val)):
        yield


def disable_x64():
    """64-bit types off inside the block; restored after."""
    return enable_x64(False)


__all__ = ["disable_x64", "enable_x64", "io_callback"]
