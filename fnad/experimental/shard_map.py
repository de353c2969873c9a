"""fnad.experimental.shard_map: the old jax.experimental.shard_map.shard_map signature,
for code not yet moved to `fnad.shard_map` (fnad/sharding.py)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fnad.sharding import Mesh
from fnad.sharding import shard_map as _shard_map

__all__ = ["shard_map"]


def shard_map(f: Callable, mesh: Mesh, in_specs: Any, out_specs: Any, check_rep: bool = True,
              auto: frozenset = frozenset()) -> Callable:
    """`fnad.shard_map(f, mesh=mesh, in_specs=..., out_specs=...)`; the mesh axes not in
    `auto` are bound for the collectives (all of them by default)."""
    names = frozenset(n for n in mesh.axis_names if n not in auto) if auto else frozenset()
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, axis_names=names,
                      check_vma=check_rep)
