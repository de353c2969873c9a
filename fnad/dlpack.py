"""fnad.dlpack: arrays to and from other libraries through DLPack, as jax.dlpack.

`from_dlpack(x)` takes any object that exports DLPack on the host (a NumPy array, a CPU
torch tensor, a jax array, an fnad Array); the other way, an fnad Array exports DLPack
itself (`Array.__dlpack__`), so `torch.from_dlpack(a)` and `np.from_dlpack(a)` take it.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes

__all__ = ["SUPPORTED_DTYPES", "from_dlpack", "is_supported_dtype"]

SUPPORTED_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128))


def is_supported_dtype(dtype) -> bool:
    """Whether arrays of `dtype` go through DLPack (jax's list: bool, the integers and
    floats of 8 to 64 bits, bfloat16, complex64/128)."""
    if dtype is None:
        raise TypeError("is_supported_dtype: dtype must not be None")
    try:
        return np.dtype(dtype) in SUPPORTED_DTYPES
    except TypeError:
        return False


def from_dlpack(external_array, device=None, copy: bool | None = None):
    """An fnad array from an object that exports DLPack on the host (jax.dlpack.from_dlpack;
    `device` puts it on a backend, `copy` as NumPy's from_dlpack)."""
    from fnad import numpy as jnp
    if not hasattr(external_array, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(external_array).__name__} does not export "
                        "DLPack (it has no __dlpack__ method)")
    return jnp.from_dlpack(external_array, device=device, copy=copy)
