"""NumPy implementations of betainc, zeta, bessel_i0e and bessel_i1e (primitives/special.py).

scipy.special in float64, rounded to the operands' dtype, with jax's values (XLA's) where
scipy's differ (checked against jax 0.10 on grids of 0, ±1, ±2, poles, ±inf and NaN):
    zeta(x, q) at a pole of q (q = 0, -1, -2, ... or -inf): inf for an even integer x
        (scipy: NaN), NaN for other x != 1 (scipy: inf for x > 1);
    zeta(x, inf) = NaN for x != 1 (scipy: 0); zeta(inf, q) = NaN for q <= 1 (scipy: inf or 1).
betainc, i0e and i1e: scipy's values are jax's.
Imported by backends/numpy_ref/elementwise.py.
"""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.elementwise import _in_float64, _special, quietly
from fnad.primitives import special as sp


def _zeta(x, q):
    x, q = np.broadcast_arrays(x, q)
    out = _special().zeta(x, q)
    pole = (q <= 0) & (np.floor(q) == q)               # floor(-inf) = -inf: a pole too
    even = np.isfinite(x) & (np.floor(x / 2) == x / 2)
    out = np.where(pole & (x != 1), np.where(even, np.inf, np.nan), out)
    out = np.where((q == np.inf) & (x != 1), np.nan, out)
    return np.where((x == np.inf) & (q <= 1), np.nan, out)


impl_rules[sp.regularized_incomplete_beta_p] = quietly(
    _in_float64(lambda a, b, x: _special().betainc(a, b, x)))
impl_rules[sp.zeta_p] = quietly(_in_float64(_zeta))
impl_rules[sp.bessel_i0e_p] = quietly(_in_float64(lambda x: _special().i0e(x)))
impl_rules[sp.bessel_i1e_p] = quietly(_in_float64(lambda x: _special().i1e(x)))
