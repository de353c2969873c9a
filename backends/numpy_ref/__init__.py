"""The `numpy` backend: eager reference implementations that define semantics.

Buffers are NumPy arrays (or NumPy scalars). Implementations never write to
their inputs: fnad arrays are immutable, so views may be shared. Each family of
primitives has its own module filling `impl_rules`.
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


from fnad.backends.numpy_ref import (cumulative, elementwise, indexing,  # noqa: E402,F401
                                     linalg, logic, reductions, shape_ops, sorting)
from fnad.backends.numpy_ref.compile import compile  # noqa: E402,F401
