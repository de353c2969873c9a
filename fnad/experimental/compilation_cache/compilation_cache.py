"""The persistent compilation cache's directory, as jax's
`jax.experimental.compilation_cache.compilation_cache`.

fnad's numba backend always keeps what it compiles on disk (generated programs, kernel
object code, numba's cache) and looks for it there before compiling; the directory is
`$FNAD_CACHE_DIR`, else the `jax_compilation_cache_dir` option, else ~/.cache/fnad/numba
(backends/numba_cpu/codegen.py `cache_dir`). It is read at every compile, so a new
directory applies to the next program compiled.
"""
from __future__ import annotations

import os
import warnings

from fnad.config import config


def set_cache_dir(path) -> None:
    """Keep compiled programs in `path` (the `jax_compilation_cache_dir` option) from the
    next compile on. `$FNAD_CACHE_DIR`, where set, still comes first: a warning says so."""
    if path is None or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"set_cache_dir: expected a directory path (str or os.PathLike), "
                        f"got {type(path).__name__}: {path!r}")
    if os.environ.get("FNAD_CACHE_DIR"):
        warnings.warn(f"set_cache_dir({os.fspath(path)!r}): $FNAD_CACHE_DIR="
                      f"{os.environ['FNAD_CACHE_DIR']!r} is set and takes precedence; "
                      "unset it to use this directory", RuntimeWarning, stacklevel=2)
    config.update("jax_compilation_cache_dir", os.fspath(path))


def reset_cache() -> None:
    """jax: return the cache to its uninitialized state, so that the next compile sets it
    up from the options again. fnad keeps no such state (the directory is read at every
    compile), so there is nothing to reset; the files and the directory option stay, as in
    jax."""
