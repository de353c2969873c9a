"""XLA lowerings of the reduction primitives.

Empty reductions give the operation's identity and NaNs propagate through max/min (XLA's
rules, which the numpy reference follows); argmax/argmin return the first extremum and
treat NaN as the extremum (jax.lax's rule, NumPy's too).
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import reductions as red


def _monoid(op, identity):
    def lowering(x, *, axes):
        return lax.reduce(x, np.asarray(identity(np.dtype(x.dtype)), x.dtype), op, axes)
    return lowering


def _reduce_max(x, *, axes):
    if np.dtype(x.dtype) == np.bool_:
        return lax.reduce_or(x, axes)                    # max of booleans: any
    return lax.reduce_max(x, axes)


def _reduce_min(x, *, axes):
    if np.dtype(x.dtype) == np.bool_:
        return lax.reduce_and(x, axes)
    return lax.reduce_min(x, axes)


def _argminmax(op):
    def lowering(x, *, axes, index_dtype):
        return op(x, axes[0], np.dtype(index_dtype))
    return lowering


impl_rules[red.reduce_sum_p] = eager(_monoid(lax.add, lambda dt: 0))
impl_rules[red.reduce_max_p] = eager(_reduce_max)
impl_rules[red.reduce_min_p] = eager(_reduce_min)
impl_rules[red.reduce_prod_p] = eager(_monoid(lax.mul, lambda dt: 1))
impl_rules[red.reduce_and_p] = eager(lambda x, *, axes: lax.reduce_and(x, axes))
impl_rules[red.reduce_or_p] = eager(lambda x, *, axes: lax.reduce_or(x, axes))
impl_rules[red.reduce_xor_p] = eager(lambda x, *, axes: lax.reduce_xor(x, axes))
impl_rules[red.argmax_p] = eager(_argminmax(lax.argmax))
impl_rules[red.argmin_p] = eager(_argminmax(lax.argmin))
