"""NumPy implementations of the reduction primitives."""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import reductions as red

impl_rules[red.reduce_sum_p] = lambda x, *, axes: np.sum(x, axis=axes, dtype=np.result_type(x))
