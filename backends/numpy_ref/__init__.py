"""The `numpy` backend: eager reference implementations that define semantics.

Buffers are NumPy arrays (or NumPy scalars). Implementations never write to
their inputs: fnad arrays are immutable, so views may be shared. Each family of
primitives has its own module filling `impl_rules`. Loading the backend keeps freed
memory in the process for the next arrays (host_memory.py; FNAD_KEEP_FREED_MEMORY=0 not).
"""
from __future__ import annotations

import numpy as np

name = "numpy"
impl_rules: dict = {}


def device_put(value: np.ndarray):
    return value


def to_numpy(buf) -> np.ndarray:
    return buf if type(buf) is np.ndarray else np.asarray(buf)


def block_until_ready(buf) -> None:
    return None


from fnad.backends.numpy_ref import (  # noqa: E402,F401
    convolution, cumulative, elementwise, indexing, linalg, logic, reductions, shape_ops, sorting,
    windowed)
from fnad.backends.numpy_ref import fft  # noqa: E402,F401
from fnad.backends.numpy_ref import ragged  # noqa: E402,F401
from fnad.backends.numpy_ref.compile import compile  # noqa: E402,F401
from fnad.backends.numpy_ref.host_memory import keep_freed_memory  # noqa: E402

keep_freed_memory()
