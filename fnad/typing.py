"""fnad.typing: annotations for array arguments, as jax.typing.

ArrayLike: what fnad functions accept as an array (fnad arrays and tracers, NumPy arrays
and scalars, Python bool/int/float/complex). DTypeLike: what they accept as a dtype.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fnad.core import Array, Tracer

ArrayLike = Array | Tracer | np.ndarray | np.bool_ | np.number | bool | int | float | complex
DTypeLike = str | type[Any] | np.dtype | Any

__all__ = ["ArrayLike", "DTypeLike"]
