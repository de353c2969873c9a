"""fnad.lax: the primitive-level API, with jax.lax's names and signatures.

Thin re-exports of the wrappers each primitive family defines (its `__all__`),
plus the few lax functions composed of several primitives, and control flow
(cond, switch, scan, map, associative_scan, while_loop, fori_loop:
primitives/control_flow.py).
"""
from __future__ import annotations

from fnad import dtypes as _dtypes
from fnad import tree_util
from fnad.core import get_aval as _get_aval
from fnad.primitives import decompositions as linalg  # noqa: F401  (as jax.lax.linalg)
from fnad.primitives import logic as _logic
from fnad.primitives.control_flow import *  # noqa: F401,F403
from fnad.primitives.convolution import *  # noqa: F401,F403
from fnad.primitives.cumulative import *  # noqa: F401,F403
from fnad.primitives.elementwise import *  # noqa: F401,F403
from fnad.primitives.indexing import *  # noqa: F401,F403
from fnad.primitives.linalg import *  # noqa: F401,F403
from fnad.primitives.logic import *  # noqa: F401,F403
from fnad.primitives.reductions import *  # noqa: F401,F403
from fnad.primitives.shape_ops import *  # noqa: F401,F403
from fnad.primitives.sorting import *  # noqa: F401,F403
from fnad.primitives.windowed import *  # noqa: F401,F403


def stop_gradient(x):
    """The identity whose derivative is zero, applied to every inexact leaf of `x`."""
    def stop(leaf):
        if _dtypes.is_inexact(_get_aval(leaf).dtype):
            return _logic.stop_gradient(leaf)
        return leaf
    return tree_util.tree_map(stop, x)


def select(pred, on_true, on_false):
    """on_true where pred else on_false (lax.select)."""
    return _logic.select_n(pred, on_false, on_true)
