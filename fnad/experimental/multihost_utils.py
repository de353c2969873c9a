"""fnad.experimental.multihost_utils: jax.experimental.multihost_utils for fnad's single
process: gathering, broadcasting and converting between host-local and global arrays are
what they are with one process holding everything, and the barriers return at once."""
import numpy as np

from fnad import tree_util

__all__ = ["assert_equal", "broadcast_one_to_all", "global_array_to_host_local_array",
           "host_local_array_to_global_array", "process_allgather", "sync_global_devices"]


def process_allgather(in_tree, tiled: bool = False):
    """Each leaf gathered from every process as a NumPy array: stacked on a new leading
    axis (of size 1 here), or with tiled=True concatenated along axis 0 (the leaf)."""
    def gather(x):
        x = np.asarray(x)
        return x if tiled else x[None]
    return tree_util.tree_map(gather, in_tree)


def broadcast_one_to_all(in_tree, is_source: bool | None = None):
    """The source process's values on every process: here, `in_tree`'s, as arrays."""
    import fnad.numpy as jnp
    return tree_util.tree_map(jnp.asarray, in_tree)


def sync_global_devices(name: str) -> None:
    """A barrier across processes (one here: returns at once)."""
    if not isinstance(name, str):
        raise TypeError(f"sync_global_devices: name must be a str, got {type(name).__name__}")


def assert_equal(in_tree, fail_message: str = "") -> None:
    """Check that every process holds the same values (one process: nothing to compare)."""


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
    """The global arrays the processes' local arrays make up: with one process, the local
    arrays themselves."""
    return local_inputs


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
    """This process's part of each global array: with one process, all of it."""
    return global_inputs
