"""fnad.sharding: jax.sharding's names on one device — Mesh, PartitionSpec (P),
NamedSharding, SingleDeviceSharding, make_mesh, set_mesh/get_mesh, shard_map and
with_sharding_constraint — so JAX code written for a mesh runs unchanged.

fnad runs on one device per backend, so every mesh here has one device and every mesh
axis has size 1: a shard is the whole array, every sharding is fully replicated, and a
sharding constraint is the identity (its spec is checked against the value's rank, as in
JAX). `shard_map` binds each mesh axis name as a named vmap axis of size 1, so the
collectives of fnad.lax (psum, axis_index, all_gather, ...) work inside it and give the
numbers JAX gives on one device. A mesh of more than one device is an error that says so.

Imports only fnad's core, tree_util, devices, batching and shape ops (all loaded by
`import fnad` before it).
"""
from __future__ import annotations

import enum
import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fnad import core, tree_util
from fnad.batching import vmap
from fnad.devices import Device, default_backend
from fnad.devices import devices as _devices
from fnad.primitives.shape_ops import expand_dims, squeeze

__all__ = ["AxisType", "Mesh", "NamedSharding", "P", "PartitionSpec", "Sharding",
           "SingleDeviceSharding", "get_mesh", "make_array_from_callback", "make_mesh",
           "set_mesh", "shard_map", "with_sharding_constraint"]

_ONE_DEVICE = "fnad runs on one device (no multi-device sharding), so every mesh axis must " \
              "have size 1"


class AxisType(enum.Enum):
    """How a mesh axis is sharded (jax.sharding.AxisType); recorded, with no effect on one
    device."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


# ---- PartitionSpec -------------------------------------------------------------------------
class _Unconstrained:
    def __repr__(self):
        return "P.UNCONSTRAINED"


class PartitionSpec(tuple):
    """For each leading dimension of an array, the mesh axis name(s) it is split over:
    None (not split), a name, or a tuple of names; missing trailing entries are None.
    A tuple (JAX 0.10's P is a tuple-like class, not a tuple subclass) and a pytree leaf."""

    UNCONSTRAINED = _Unconstrained()        # jax's P.UNCONSTRAINED: left to the compiler

    def __new__(cls, *partitions):
        parts = tuple(tuple(p) if isinstance(p, list) else p for p in partitions)
        for p in parts:
            ok = (p is None or p is cls.UNCONSTRAINED or isinstance(p, str) or
                  isinstance(p, tuple) and all(isinstance(n, str) for n in p))
            if not ok:
                raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a "
                                f"tuple of names; got {p!r}")
        return super().__new__(cls, parts)

    def __repr__(self):                                       # as jax's: P('x',), P('x', None)
        return "P(" + ", ".join(repr(p) for p in self) + ("," if len(self) == 1 else "") + ")"

    def axis_names(self) -> list:
        """The mesh axis names the spec uses, in order (with repeats)."""
        out = []
        for p in self:
            if p is None or p is self.UNCONSTRAINED:
                continue
            out.extend(p if isinstance(p, tuple) else (p,))
        return out


P = PartitionSpec
_REPLICATED = PartitionSpec()


# ---- Mesh ----------------------------------------------------------------------------------
class Mesh:
    """An array of devices with a name per axis (jax.sharding.Mesh). In fnad the array
    holds one fnad Device: every axis has size 1. Usable as a context manager, which sets
    it as the current mesh (as `set_mesh`)."""

    def __init__(self, devices: Any, axis_names: str | Sequence[str],
                 axis_types: tuple | None = None):
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        devs = np.array(devices, dtype=object)              # fnad Devices are not sequences
        if not names and devs.size == 0:
            devs = np.empty((0,), dtype=object)                 # the empty mesh, Mesh((), ())
        elif devs.ndim != len(names):
            raise ValueError(f"Mesh: the devices array has {devs.ndim} dimensions (shape "
                             f"{devs.shape}) but {len(names)} axis names were given "
                             f"{names}; they must match")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names must be distinct, got {names}")
        if names and devs.size != 1:
            raise ValueError(f"Mesh of shape {devs.shape} holds {devs.size} devices; "
                             f"{_ONE_DEVICE}. Use fnad.make_mesh((1,) * len(names), names), "
                             f"or one device: fnad.devices(fnad.default_backend())[:1]")
        for d in devs.flat:
            if not isinstance(d, Device):
                raise TypeError(f"Mesh: devices must be fnad Devices (from fnad.devices()), "
                                f"got {type(d).__name__}")
        if axis_types is None:
            axis_types = (AxisType.Auto,) * len(names)
        axis_types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
        if len(axis_types) != len(names):
            raise ValueError(f"Mesh: {len(axis_types)} axis_types for {len(names)} axes")
        self.devices = devs
        self.axis_names = names
        self.axis_types = axis_types

    shape = property(lambda self: OrderedDict(zip(self.axis_names, self.axis_sizes)))
    axis_sizes = property(lambda self: tuple(self.devices.shape) if self.axis_names else ())
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes) if self.axis_names else 0)
    empty = property(lambda self: not self.axis_names)
    device_ids = property(lambda self: np.array([d.id for d in self.devices.flat],
                                                dtype=int).reshape(self.devices.shape))
    local_devices = property(lambda self: list(self.devices.flat))
    _flat_devices_tuple = property(lambda self: tuple(self.devices.flat))

    def __eq__(self, other):
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names and
                self.axis_types == other.axis_types and
                self.devices.shape == other.devices.shape and
                self._flat_devices_tuple == other._flat_devices_tuple)

    def __hash__(self):
        return hash((self.axis_names, self.axis_types, self.devices.shape,
                     self._flat_devices_tuple))

    def __str__(self):
        if self.empty:
            return "Mesh()"
        axes = ", ".join(f"{n!r}: {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        return f"Mesh({axes}, axis_types={self.axis_types!r})"

    def __repr__(self):
        return (f"Mesh(axis_sizes={self.axis_sizes!r}, axis_names={self.axis_names!r}, "
                f"axis_types={self.axis_types!r})")

    def __enter__(self):
        _mesh_state.stack.append(_mesh_state.current)
        _mesh_state.current = self
        return self

    def __exit__(self, *exc):
        _mesh_state.current = _mesh_state.stack.pop()
        return False


_EMPTY_MESH = Mesh((), ())


class _MeshState(threading.local):
    def __init__(self):
        self.current = _EMPTY_MESH
        self.stack: list = []


_mesh_state = _MeshState()


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str],
              axis_types: tuple | None = None, *, devices: Sequence[Device] | None = None
              ) -> Mesh:
    """A Mesh of shape `axis_shapes` named `axis_names` (jax.make_mesh) over `devices`
    (default: those of the default backend). fnad runs on one device, so the product of
    `axis_shapes` must be 1; the mesh holds the first device. `axis_types` defaults to
    Explicit, as in JAX 0.10."""
    shape = tuple(int(s) for s in axis_shapes)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: axis_shapes {shape} and axis_names {names} must have "
                         "the same length")
    found = list(devices) if devices is not None else _devices(default_backend())
    if math.prod(shape) != 1:
        raise ValueError(f"make_mesh: a mesh of shape {shape} needs {math.prod(shape)} "
                         f"devices, but {_ONE_DEVICE} (the number of devices fnad uses: 1; "
                         f"devices available: {len(found)})")
    if not found:
        raise ValueError("make_mesh: no devices given")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)
    devs = np.empty(shape, dtype=object)
    devs.flat[0] = found[0]
    return Mesh(devs, names, axis_types)


def get_mesh() -> Mesh:
    """The current mesh (set by `set_mesh` or `with mesh:`); an empty Mesh() when none."""
    return _mesh_state.current


class set_mesh:  # noqa: N801  (jax's name; a function-like context manager as in JAX)
    """Make `mesh` the current mesh now (jax.set_mesh); used with `with`, the previous one
    comes back on exit."""

    def __init__(self, mesh: Mesh | None):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh: expected a Mesh or None, got {type(mesh).__name__}")
        self._prev = _mesh_state.current
        _mesh_state.current = _EMPTY_MESH if mesh is None else mesh

    def __enter__(self):
        return _mesh_state.current

    def __exit__(self, *exc):
        _mesh_state.current = self._prev
        return False


# ---- shardings -----------------------------------------------------------------------------
class Sharding:
    """How an array is laid out on devices (jax.sharding.Sharding): on one device, whole."""

    memory_kind = "device"

    @property
    def device_set(self) -> set:
        return {self._device}

    addressable_devices = device_set
    num_devices = property(lambda self: 1)
    is_fully_replicated = property(lambda self: True)
    is_fully_addressable = property(lambda self: True)

    def shard_shape(self, global_shape: Sequence[int]) -> tuple:
        """The shape of each shard: the whole shape (every mesh axis has size 1)."""
        return tuple(global_shape)

    def addressable_devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        return {self._device: tuple(slice(None) for _ in global_shape)}

    devices_indices_map = addressable_devices_indices_map


class SingleDeviceSharding(Sharding):
    """The whole array on `device` (an fnad Device)."""

    def __init__(self, device: Device, *, memory_kind: str | None = None):
        if not isinstance(device, Device):
            raise TypeError(f"SingleDeviceSharding: expected an fnad Device, got "
                            f"{type(device).__name__}")
        self._device = device

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and self._device == other._device

    def __hash__(self):
        return hash(("single", self._device))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


class NamedSharding(Sharding):
    """An array split over `mesh` by `spec` (a PartitionSpec): on one device, whole."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec = _REPLICATED, *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: expected a Mesh, got {type(mesh).__name__}")
        if mesh.empty:
            raise ValueError("NamedSharding: the mesh is empty")
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"NamedSharding: spec must be a PartitionSpec (P(...)), got "
                            f"{spec!r}")
        _check_names(spec, mesh.axis_names, "NamedSharding")
        self.mesh, self.spec = mesh, spec
        self._device = mesh.devices.flat[0]

    def shard_shape(self, global_shape: Sequence[int]) -> tuple:
        _check_rank(self.spec, len(global_shape), f"NamedSharding with spec {self.spec!r}",
                    f"an array of shape {tuple(global_shape)}")
        return tuple(global_shape)

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and (self.mesh, self.spec) == (other.mesh,
                                                                               other.spec)

    def __hash__(self):
        return hash((self.mesh, self.spec))

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!s}, spec={self.spec!r}, memory_kind=device)"


def _check_names(spec: PartitionSpec, names: tuple, where: str) -> None:
    used = spec.axis_names()
    for n in used:
        if n not in names:
            raise ValueError(f"{where}: spec {spec!r} names the axis {n!r}, which is not an "
                             f"axis of the mesh {names}")
    dup = sorted({n for n in used if used.count(n) > 1})
    if dup:
        raise ValueError(f"{where}: spec {spec!r} names the mesh axis {dup[0]!r} twice (a "
                         "mesh axis can split at most one dimension)")


def _check_rank(spec: PartitionSpec, ndim: int, where: str, what: str) -> None:
    if len(spec) > ndim:
        entries = "1 entry" if len(spec) == 1 else f"{len(spec)} entries"
        raise ValueError(f"{where}: the spec has {entries} but {what} has rank {ndim}; a "
                         f"spec may have at most one entry per dimension")


def _as_sharding(s, where: str) -> Sharding:
    """A Sharding, or a PartitionSpec over the current mesh (as JAX does)."""
    if isinstance(s, Sharding):
        return s
    if isinstance(s, PartitionSpec):
        if get_mesh().empty:
            raise RuntimeError(f"{where}: a PartitionSpec needs a current mesh: set one with "
                               "fnad.set_mesh(mesh), or pass a NamedSharding(mesh, spec)")
        return NamedSharding(get_mesh(), s)
    raise TypeError(f"{where}: expected a Sharding or a PartitionSpec, got {type(s).__name__}")


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """The array of `shape` laid out by `sharding`, each shard from
    `data_callback(index)` (jax.make_array_from_callback). fnad's shardings have one shard,
    the whole array: the callback is called once with a tuple of full slices, its result
    must have `shape` (and `dtype`, when given, is applied), and it lands on the
    sharding's device."""
    shape = tuple(int(d) for d in shape)
    sharding = _as_sharding(sharding, "make_array_from_callback")
    index = sharding.addressable_devices_indices_map(shape)[sharding._device]
    data = np.asarray(data_callback(index))
    if data.shape != shape:
        raise ValueError(f"make_array_from_callback: the callback returned shape "
                         f"{data.shape} for index {index}; expected the shard shape {shape}")
    if dtype is not None:
        data = data.astype(dtype)
    from fnad.devices import device_put
    return device_put(data, sharding)


def with_sharding_constraint(x, shardings):
    """x, unchanged (jax.lax.with_sharding_constraint): on one device every layout is the
    whole array. `shardings` is a Sharding, a PartitionSpec (over the current mesh), or a
    pytree prefix of `x` of those (not None); a NamedSharding's spec is checked against each leaf's
    rank, as in JAX. Traceable and differentiable (the identity)."""
    where = "with_sharding_constraint"
    leaves = tree_util.tree_leaves(x)
    try:
        specs = tree_util.broadcast_prefix(shardings, x,
                                           is_leaf=lambda s: isinstance(s, Sharding))
    except ValueError as e:
        raise ValueError(f"{where}: shardings must be a sharding or a pytree prefix of x: "
                         f"{e}") from None
    for i, (leaf, s) in enumerate(zip(leaves, specs)):
        if s is None:
            raise ValueError(f"{where}: the sharding for leaf {i} of x is None; pass a "
                             "Sharding or a PartitionSpec for every leaf (as JAX requires)")
        s = _as_sharding(s, where)
        if isinstance(s, NamedSharding):
            shape = core.get_aval(leaf).shape
            _check_rank(s.spec, len(shape), f"{where} with spec {s.spec!r}",
                        f"leaf {i} of x, of shape {shape},")
    return x


# ---- shard_map -----------------------------------------------------------------------------
_INFER = object()           # in_specs not given: every input replicated (fnad's arrays are)


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = _INFER,
              mesh: Mesh | None = None, axis_names: Any = frozenset(), check_vma: bool = True,
              check_rep: bool | None = None) -> Callable:
    """`f` mapped over the shards of its arguments (jax.shard_map; also usable as a
    decorator with `f` omitted). Every mesh axis has size 1 in fnad, so each shard is the
    whole array: `f` runs once on the arguments as they are, inside one named vmap axis of
    size 1 per mesh axis (all of `mesh`'s, or `axis_names`), so `lax.psum(x, "x")`,
    `axis_index`, `all_gather`, ... see a one-member axis, as in JAX on one device.

    `in_specs` / `out_specs`: PartitionSpecs (None: P()), pytree prefixes of the argument
    tuple / the outputs; checked as JAX does (structure, rank, names in the mesh). `mesh`
    defaults to the current mesh (`set_mesh`). `check_vma` (`check_rep` of the old
    jax.experimental.shard_map) is accepted; fnad does not check that an output whose spec
    omits an axis is the same across it (on a size-1 axis it always is)."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma,
                                 check_rep=check_rep)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable, got {type(f).__name__}")
    name = getattr(f, "__name__", type(f).__name__)

    @functools.wraps(f)
    def mapped(*args, **kwargs):
        if kwargs:
            raise TypeError(f"shard_map of {name}: keyword arguments are not supported (as "
                            f"in JAX); pass {sorted(kwargs)} positionally")
        m = get_mesh() if mesh is None else mesh
        if not isinstance(m, Mesh):
            raise TypeError(f"shard_map of {name}: mesh must be a Mesh, got "
                            f"{type(m).__name__}")
        if m.empty:
            raise ValueError(f"shard_map of {name}: no mesh: pass mesh=, or set one with "
                             "fnad.set_mesh(mesh)")
        manual = tuple(n for n in m.axis_names if not axis_names or n in axis_names)
        for n in axis_names:
            if n not in m.axis_names:
                raise ValueError(f"shard_map of {name}: axis_names has {n!r}, which is not "
                                 f"an axis of the mesh {m.axis_names}")
        flat, in_tree = tree_util.tree_flatten(args)
        specs = [P()] * len(flat) if in_specs is _INFER else \
            _spread(in_specs, args, f"shard_map of {name}: in_specs", "the arguments")
        for i, (x, spec) in enumerate(zip(flat, specs)):
            _check_spec(spec, core.get_aval(x).ndim, manual, f"shard_map of {name}: in_specs",
                        f"argument leaf {i} of shape {core.get_aval(x).shape}")
        out_tree = []

        def body(*leaves):
            out = f(*tree_util.tree_unflatten(in_tree, leaves))
            out_flat, tree = tree_util.tree_flatten(out)
            out_tree.append(tree)
            return out_flat

        k = len(manual)
        run = body
        for axis in reversed(manual):               # the mesh's first axis outermost
            run = vmap(run, axis_name=axis, axis_size=1)
        lead = tuple(range(k))
        outs = run(*[expand_dims(x, lead) for x in flat])       # [1]*k + shape
        tree = out_tree[-1]
        out_flat = [squeeze(o, lead) for o in outs]            # [1]*k + shape -> shape
        out = tree_util.tree_unflatten(tree, out_flat)
        ospecs = _spread(out_specs, out, f"shard_map of {name}: out_specs", "the outputs")
        for i, (o, spec) in enumerate(zip(out_flat, ospecs)):
            _check_spec(spec, core.get_aval(o).ndim, manual, f"shard_map of {name}: out_specs",
                        f"output leaf {i} of shape {core.get_aval(o).shape}")
        return out

    return mapped


def _spread(specs, tree, where: str, what: str) -> list:
    """The spec of each leaf of `tree`, `specs` a pytree prefix of it."""
    try:
        return tree_util.broadcast_prefix(specs, tree)
    except ValueError as e:
        hint = " (a tuple with one entry per argument)" if what == "the arguments" else ""
        raise ValueError(f"{where} must be a PartitionSpec or a pytree prefix of "
                         f"{what}{hint}: {e}") from None


def _check_spec(spec, ndim: int, manual: tuple, where: str, what: str) -> None:
    if spec is None:
        return
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{where}: expected PartitionSpecs (P(...)) or None, got {spec!r} for "
                        f"{what}")
    _check_names(spec, manual, where)
    _check_rank(spec, ndim, f"{where} {spec!r}", what)
