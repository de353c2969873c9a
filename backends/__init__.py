"""fnad.backends: the registry of backends, each loaded on its first use.

A backend is a module with `name`, `impl_rules` ({primitive: callable} for
eager execution), `device_put(np_value)`, `to_numpy(buffer)` and
`block_until_ready(buffer)`; jit backends add `compile(jaxpr)`. Importing this
package imports no backend (and so never numba or jax).
"""
from __future__ import annotations

import importlib
from types import ModuleType

# name -> module path; a backend's module is imported the first time it is asked for.
_modules = {
    "numpy": "fnad.backends.numpy_ref",
    "xla": "fnad.backends.xla",
    "metal": "fnad.backends.metal",
    "numba": "fnad.backends.numba_cpu",
    "cuda": "fnad.backends.cuda",
}
_loaded: dict[str, ModuleType] = {}


def get_backend(name: str) -> ModuleType:
    """The backend module called `name`, importing it on first use."""
    backend = _loaded.get(name)
    if backend is not None:
        return backend
    path = _modules.get(name)
    if path is None:
        raise ValueError(f"unknown backend {name!r}; known backends: {sorted(_modules)}")
    backend = importlib.import_module(path)
    _loaded[name] = backend
    return backend


def register_backend(name: str, module_path: str) -> None:
    """Make a backend module available under `name` (imported lazily)."""
    _modules[name] = module_path
    _loaded.pop(name, None)


def backend_names() -> list[str]:
    return sorted(_modules)


def backends_with_impl(prim) -> list[str]:
    """Names of the backends that have an implementation of `prim`.

    Only backends that import cleanly are asked: a backend whose optional
    dependency is missing has no implementation of anything here.
    """
    names = []
    for name in backend_names():
        try:
            backend = get_backend(name)
        except ImportError:
            continue
        if prim in backend.impl_rules:
            names.append(name)
    return names
