"""fnad.scipy.cluster.vq: vq, the nearest code of a code book for each observation, as
jax.scipy.cluster.vq (composed from fnad.numpy)."""
from __future__ import annotations

import fnad.numpy as jnp
from fnad.numpy._core import promote_dtypes_inexact

__all__ = ["vq"]


def vq(obs, code_book, check_finite: bool = True):
    """(code [M], dist [M]): for each observation obs[m] [N] the index of the code-book row
    code_book[k] [N] nearest in Euclidean distance (the first on ties), and that distance
    (scipy.cluster.vq.vq). 1-D obs and code_book hold observations and codes of length 1.
    check_finite is accepted and ignored, as jax (no data-dependent check under jit). The
    gradient of dist is NaN where an observation equals its code (|·| at 0), as jax."""
    del check_finite
    obs, code_book = promote_dtypes_inexact(jnp.asarray(obs), jnp.asarray(code_book))
    if obs.ndim != code_book.ndim:
        raise ValueError(f"vq: obs and code_book must have the same rank, got {obs.ndim} "
                         f"and {code_book.ndim}")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if obs.ndim != 2:
        raise ValueError(f"vq: obs and code_book must be 1-D or 2-D, got rank {obs.ndim}")
    if obs.shape[1] != code_book.shape[1]:
        raise ValueError(f"vq: observations have {obs.shape[1]} features but codes have "
                         f"{code_book.shape[1]}")
    diff = obs[:, None, :] - code_book[None, :, :]                       # [M, K, N]
    dist = jnp.sqrt(jnp.sum(jnp.real(diff * jnp.conj(diff)), axis=-1))  # [M, K]
    code = jnp.argmin(dist, axis=-1)                                     # [M]
    return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
