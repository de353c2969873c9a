"""fnad.experimental.mesh_utils: jax.experimental.mesh_utils' device-mesh builders, for
fnad's one device: the only meshes are those of size 1 (every axis 1)."""
import math

import numpy as np

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


def _mesh(what: str, shape, devices):
    from fnad.devices import devices as all_devices
    devs = list(all_devices()[:1] if devices is None else devices)
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) != len(devs):
        raise ValueError(f"{what}: a mesh of shape {shape} needs {math.prod(shape)} devices, "
                         f"got {len(devs)} (fnad runs on one device: use axes of size 1)")
    out = np.empty(len(devs), dtype=object)
    out[:] = devs
    return out.reshape(shape)


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False) -> np.ndarray:
    """A NumPy array of devices of shape `mesh_shape` (for fnad.sharding.Mesh)."""
    return _mesh("create_device_mesh", mesh_shape, devices)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """The mesh of shape mesh_shape * dcn_mesh_shape (per axis) over one process."""
    shape = tuple(int(a) * int(b) for a, b in zip(mesh_shape, dcn_mesh_shape))
    if len(mesh_shape) != len(dcn_mesh_shape):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {tuple(mesh_shape)} and "
                         f"dcn_mesh_shape {tuple(dcn_mesh_shape)} must have one entry per axis")
    return _mesh("create_hybrid_device_mesh", shape, devices)
