"""Helpers shared by the distributions of fnad.scipy.stats."""
from __future__ import annotations

import fnad.numpy as jnp
from fnad import lax


def clamp(lo, y, hi):
    """lax.clamp(lo, y, hi) with jax's derivative in y: the tangent passes strictly inside
    (lo, hi) and is *selected* away outside, so that an infinite or NaN derivative of what
    follows at the clamped value (gammainc at 0, say) gives 0, not 0·inf = NaN. (fnad's
    clamp JVP multiplies by the 0/1 mask instead.)"""
    inside = (y > lo) & (y < hi)
    return jnp.where(inside, y, lax.stop_gradient(lax.clamp(lo, y, hi)))
