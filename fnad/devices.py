"""fnad.devices: where arrays live — `devices`, `default_backend`, `device_put`,
`block_until_ready`, `default_device`, `device_count`, `local_devices`.

fnad's unit of placement is the backend: an Array holds one backend's buffer (NumPy
memory for `numpy` and `numba`, a jax array for `xla`, ...). A Device names a backend
(and, for xla, the jax device behind it) and its platform. `device_put(x, "xla")` moves
every leaf of a pytree there; eager operations run on their operands' backend;
`jit(f, backend=...)` compiles for one.

Where JAX code names a platform ("cpu", "gpu") instead of a backend, `backend_for` picks
the backend: the one in use (the eager default, or the jit default for `jit`) when it runs
on that platform, else the first that does, xla first (JAX's own runtime).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from fnad import core, tree_util
from fnad.config import config
from fnad.core import Array

__all__ = ["Device", "backend_for", "block_until_ready", "default_backend", "default_device",
           "device_count", "device_get", "device_put", "devices", "local_device_count",
           "local_devices"]

PLATFORMS = ("cpu", "gpu")             # JAX platform names that are not fnad backends


class Device:
    """A place arrays live: a backend (and its platform: cpu, gpu, metal)."""

    __slots__ = ("backend", "platform", "id")

    def __init__(self, backend: str, platform: str, id: int = 0):
        self.backend = backend
        self.platform = platform
        self.id = id

    def __eq__(self, other):
        return isinstance(other, Device) and (self.backend, self.id) == (other.backend,
                                                                          other.id)

    def __hash__(self):
        return hash((self.backend, self.id))

    def __repr__(self):
        return f"Device(backend={self.backend!r}, platform={self.platform!r}, id={self.id})"


def devices(backend: str | None = None) -> list[Device]:
    """The devices of `backend`, a backend name or a platform ("cpu", "gpu"); default:
    every backend that loads here (e.g. numpy, numba, and xla when jax is installed). A
    platform lists the devices of every backend on it, the default backend's first."""
    from fnad.backends import backend_names
    if backend in PLATFORMS and backend not in backend_names():
        names = _preferred(default_backend(), config.jax_jit_backend)
        found = [d for d in _devices_of(names, quiet=True) if d.platform == backend]
        if not found:
            raise RuntimeError(_no_platform(backend))
        return found
    if backend is not None and backend not in backend_names():
        raise ValueError(f"unknown backend {backend!r}; known backends: {backend_names()}, "
                         f"or a platform: {list(PLATFORMS)}")
    return _devices_of([backend] if backend is not None else backend_names(),
                       quiet=backend is None)


def _devices_of(names: list, quiet: bool) -> list[Device]:
    from fnad.backends import get_backend
    out = []
    for name in names:
        try:
            module = get_backend(name)
        except ImportError:
            if not quiet:
                raise
            continue
        native = getattr(module, "devices", None)        # xla: jax's devices
        if native is None:
            out.append(Device(name, "cpu"))
        else:
            out.extend(Device(name, d.platform, i) for i, d in enumerate(native()))
    return out


def _preferred(*first: str) -> list[str]:
    """Backend names in the order a platform is matched: `first`, xla, then the rest."""
    from fnad.backends import backend_names
    names = backend_names()
    order = [*first, "xla"] + names
    return [n for i, n in enumerate(order) if n in names and n not in order[:i]]


def _no_platform(platform: str) -> str:
    return (f"no {platform} device: no backend that loads here runs on {platform!r} (fnad's "
            f"backends: xla runs where jax has a {platform} device, cuda needs numba-cuda and "
            f"an NVIDIA GPU)")


def backend_for(name: str, *, jit: bool = False) -> str:
    """The backend a backend name or platform ("cpu", "gpu") stands for: the name itself,
    or for a platform the default backend (`jax_jit_backend` when `jit`, else the eager
    default) when it runs there, else the first backend that does (xla first)."""
    from fnad.backends import backend_names
    if name in backend_names():
        return name
    if name not in PLATFORMS:
        raise ValueError(f"unknown backend {name!r}; known backends: {backend_names()}, or a "
                         f"platform: {list(PLATFORMS)}")
    first = config.jax_jit_backend if jit else default_backend()
    for candidate in _preferred(first):
        try:
            if any(d.platform == name for d in _devices_of([candidate], quiet=False)):
                return candidate
        except ImportError:
            continue
    raise RuntimeError(_no_platform(name))


def device_of(x: Array) -> Device:
    """The Device an Array's buffer is on."""
    module = x._backend
    native = getattr(module, "devices", None)
    if native is None:
        return Device(module.name, "cpu")
    found = native()
    index = 0
    on = getattr(x._value, "devices", None)             # a jax array knows its device
    if callable(on) and len(found) > 1:
        here = next(iter(on()))
        index = next((i for i, d in enumerate(found) if d == here), 0)
    return Device(module.name, found[index].platform, index)


def device_count(backend: str | None = None) -> int:
    """How many devices `backend` (a name or platform; default: the default backend) has:
    1 for every backend but xla on a machine with several accelerators."""
    return len(devices(backend or default_backend()))


def local_device_count(backend: str | None = None) -> int:
    """`device_count`: fnad runs in one process."""
    return device_count(backend)


def local_devices(process_index: int | None = None, backend: str | None = None) -> list:
    """`devices(backend)`: fnad runs in one process (`process_index` 0 or None)."""
    if process_index not in (None, 0):
        raise ValueError(f"local_devices: fnad runs in one process; process_index must be 0, "
                         f"got {process_index!r}")
    return devices(backend)


def process_index(backend: str | None = None) -> int:
    """This process's index among the processes of the computation: 0 (fnad runs in one
    process), as ``jax.process_index`` on one host."""
    return 0


def process_count(backend: str | None = None) -> int:
    """How many processes take part: 1 (fnad runs in one process)."""
    return 1


def process_indices(backend: str | None = None) -> list[int]:
    """The indices of the processes taking part: [0]."""
    return [0]


host_id, host_count, host_ids = process_index, process_count, process_indices


@contextlib.contextmanager
def default_device(device: Device | str | None) -> Iterator[None]:
    """Context manager, as `jax.default_device`: new arrays go to `device`'s backend (a
    Device, a backend name or a platform: fnad places by backend, so on xla jax's default
    device of it) and jit compiles for that backend, restored on exit. A
    device of the `numpy` backend (the interpreter) leaves jit on its default; one of
    `numba` makes new arrays NumPy-backed (numba's arrays are the numpy backend's).
    None leaves both as they are."""
    if device is None:
        yield
        return
    name = device.backend if isinstance(device, Device) else backend_for(str(device))
    from fnad.backends import get_backend
    home = getattr(get_backend(name), "eager_backend", None)
    options = {"jax_default_backend": home.name if home is not None else name}
    if name != "numpy":
        options["jax_jit_backend"] = name
    with config.override(**options):
        yield


def default_backend() -> str:
    """The backend eager operations on new values use (`config.jax_default_backend`)."""
    return config.jax_default_backend


def _backend_of(device) -> Any:
    from fnad.backends import get_backend
    if device is None:
        return core.default_backend()
    if isinstance(device, Device):
        return get_backend(device.backend)
    if isinstance(device, str):
        return get_backend(backend_for(device))
    from fnad.sharding import Sharding
    if isinstance(device, Sharding):
        return get_backend(device._device.backend)
    raise TypeError(f"device_put: expected a backend name or an fnad Device (or a Sharding of "
                    f"fnad.sharding), got {type(device).__name__}")


def device_put(x, device: Device | str | None = None):
    """Every leaf of `x` as an Array on `device` (a backend name, Device, or a Sharding of
    fnad.sharding — NamedSharding, SingleDeviceSharding — or a PartitionSpec over the current
    mesh, as in JAX: its device's backend, after checking a NamedSharding's spec against
    each leaf's rank; default: the default backend). Values already there are returned as
    they are."""
    from fnad import sharding
    if isinstance(device, sharding.PartitionSpec):
        device = sharding._as_sharding(device, "device_put")
    backend = _backend_of(device)
    if isinstance(device, sharding.NamedSharding):
        for i, leaf in enumerate(tree_util.tree_leaves(x)):
            shape = core.get_aval(leaf).shape
            sharding._check_rank(device.spec, len(shape), f"device_put with spec "
                                 f"{device.spec!r}", f"leaf {i}, of shape {shape},")

    def put(leaf):
        if type(leaf) is Array:
            if leaf._backend is backend:
                return leaf
            value = np.asarray(leaf._backend.to_numpy(leaf._value))
            return Array(backend.device_put(value), leaf.aval, backend)
        if isinstance(leaf, core.Tracer):
            return leaf                 # under a transformation placement is the jit's job
        aval = core.get_aval(leaf)
        return Array(backend.device_put(core.canonicalize_value(leaf, aval)), aval, backend)
    return tree_util.tree_map(put, x)


def device_get(x):
    """Every Array leaf of `x` as a NumPy array on the host, other leaves as they are, as
    `jax.device_get` (a NumPy-backed Array gives its own buffer, read-only)."""
    def get(leaf):
        if type(leaf) is Array or isinstance(leaf, core.Tracer):
            return np.asarray(leaf)            # a tracer: fnad's conversion error
        return leaf
    return tree_util.tree_map(get, x)


def block_until_ready(x):
    """Wait until every array leaf of `x` is computed; returns `x`."""
    for leaf in tree_util.tree_leaves(x):
        if type(leaf) is Array:
            leaf.block_until_ready()
    return x
