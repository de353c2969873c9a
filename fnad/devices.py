"""fnad.devices: where arrays live — `devices`, `default_backend`, `device_put`,
`block_until_ready`.

fnad's unit of placement is the backend: an Array holds one backend's buffer (NumPy
memory for `numpy` and `numba`, a jax array for `xla`, ...). A Device names a backend
(and, for xla, the jax device behind it). `device_put(x, "xla")` moves every leaf of a
pytree there; eager operations run on their operands' backend; `jit(f, backend=...)`
compiles for one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fnad import core, tree_util
from fnad.config import config
from fnad.core import Array

__all__ = ["Device", "block_until_ready", "default_backend", "device_put", "devices"]


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
    """The devices of `backend` (default: every backend that loads here, e.g. numpy,
    numba, and xla when jax is installed)."""
    from fnad.backends import backend_names, get_backend
    names = [backend] if backend is not None else backend_names()
    out = []
    for name in names:
        try:
            module = get_backend(name)
        except ImportError:
            if backend is not None:
                raise
            continue
        native = getattr(module, "devices", None)        # xla: jax's devices
        if native is None:
            out.append(Device(name, "cpu"))
        else:
            out.extend(Device(name, d.platform, i) for i, d in enumerate(native()))
    return out


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
        return get_backend(device)
    raise TypeError(f"device_put: expected a backend name or an fnad Device, got "
                    f"{type(device).__name__}")


def device_put(x, device: Device | str | None = None):
    """Every leaf of `x` as an Array on `device` (a backend name or Device; default: the
    default backend). Values already there are returned as they are."""
    backend = _backend_of(device)

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


def block_until_ready(x):
    """Wait until every array leaf of `x` is computed; returns `x`."""
    for leaf in tree_util.tree_leaves(x):
        if type(leaf) is Array:
            leaf.block_until_ready()
    return x
