"""fnad.optim._layerwise: per-leaf (layer-wise) and factored preconditioners.

scale_by_trust_ratio (LARS, LAMB, Fromage), scale_by_param_block_norm/rms,
scale_by_novograd, scale_by_factored_rms (Adafactor), scale_by_sm3, and the stateless
scale_by_sign, centralize and scale_by_polyak, with optax's names, states and equations.
Imports only fnad's public API and fnad.optim's own modules.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import lax, tree_util

from . import tree_utils as otu
from ._base import (
    EmptyState, GradientTransformation, _check_structure, _need_params, _safe_increment,
    _zero_count, init_empty_state,
)
from ._transforms import _beta, _dtype_or_none, _nonneg

__all__ = [
    "FactoredState", "ScaleByNovogradState", "ScaleBySM3State", "ScaleByTrustRatioState",
    "centralize", "scale_by_factored_rms", "scale_by_novograd", "scale_by_param_block_norm",
    "scale_by_param_block_rms", "scale_by_polyak", "scale_by_sign", "scale_by_sm3",
    "scale_by_trust_ratio",
]

tree_map = tree_util.tree_map


# ---- layer-wise (per-leaf norm) methods -------------------------------------------------
def _safe_norm(x, min_norm):
    """‖x‖ (all elements), or min_norm where ‖x‖ <= min_norm (with a finite gradient)."""
    norm = jnp.sqrt(jnp.sum(x * x))
    x = jnp.where(norm <= min_norm, jnp.ones_like(x), x)
    return jnp.where(norm <= min_norm, min_norm, jnp.sqrt(jnp.sum(x * x)))


def _safe_rms(x, min_rms):
    rms = jnp.sqrt(jnp.mean(x * x))
    x = jnp.where(rms <= min_rms, jnp.ones_like(x), x)
    return jnp.where(rms <= min_rms, min_rms, jnp.sqrt(jnp.mean(x * x)))


ScaleByTrustRatioState = EmptyState


def scale_by_trust_ratio(min_norm: float = 0.0, trust_coefficient: float = 1.0,
                         eps: float = 0.0) -> GradientTransformation:
    """LARS/LAMB's layer-wise trust ratio (You et al. 2017, 2020), per leaf:

        r = c · ‖p‖ / (‖u‖ + ε)       (norms floored at min_norm)
        u ← u · r,   or u unchanged if ‖p‖ = 0 or ‖u‖ = 0
    Needs params.
    """
    _nonneg("scale_by_trust_ratio", min_norm=min_norm, eps=eps)

    def update(grads, state, params=None):
        _need_params("scale_by_trust_ratio (lamb, lars, fromage)", params)

        def one(u, p):
            param_norm = _safe_norm(p, min_norm)
            update_norm = _safe_norm(u, min_norm)
            ratio = trust_coefficient * param_norm / (update_norm + eps)
            zero = jnp.logical_or(param_norm == 0.0, update_norm == 0.0)
            return u * jnp.where(zero, jnp.asarray(1.0, dtype=p.dtype), ratio)

        return tree_map(one, grads, params), state

    return GradientTransformation(init_empty_state, update)


def scale_by_param_block_norm(min_scale: float = 1e-3) -> GradientTransformation:
    """u = g · max(‖p‖, min_scale), per leaf. Needs params."""
    def update(grads, state, params=None):
        _need_params("scale_by_param_block_norm", params)
        return tree_map(lambda u, p: u * _safe_norm(p, min_scale), grads, params), state

    return GradientTransformation(init_empty_state, update)


def scale_by_param_block_rms(min_scale: float = 1e-3) -> GradientTransformation:
    """u = g · max(rms(p), min_scale), per leaf. Needs params."""
    def update(grads, state, params=None):
        _need_params("scale_by_param_block_rms (adafactor)", params)
        return tree_map(lambda u, p: u * _safe_rms(p, min_scale), grads, params), state

    return GradientTransformation(init_empty_state, update)


class ScaleByNovogradState(NamedTuple):
    count: Any
    mu: Any                                    # pytree like params
    nu: Any                                    # one scalar per leaf: EMA of ‖g‖²


def scale_by_novograd(b1: float = 0.9, b2: float = 0.25, eps: float = 1e-8,
                      eps_root: float = 0.0, weight_decay: float = 0.0,
                      mu_dtype: Any = None) -> GradientTransformation:
    """NovoGrad (Ginsburg et al. 2019): layer-wise second moments, per leaf:

        v' = ‖g‖²                              at the first step
        v' = β2 · v + (1 - β2) · ‖g‖²          after
        a  = g / (√(v' + ε_root) + ε) + λ · p
        m' = a  (first step),   m' = β1 · m + a  (after);      u = m'
    Needs params.
    """
    where = "scale_by_novograd"
    _beta(where, "b1", b1, closed=True)
    _beta(where, "b2", b2, closed=True)
    _nonneg(where, eps=eps, eps_root=eps_root)
    mu_dtype = _dtype_or_none(mu_dtype)

    def init(params):
        return ScaleByNovogradState(
            count=_zero_count(), mu=otu.tree_zeros_like(params, dtype=mu_dtype),
            nu=tree_map(lambda p: jnp.asarray(0.0, dtype=jnp.asarray(p).dtype), params))

    def update(grads, state, params=None):
        _need_params(where + " (novograd)", params)
        _check_structure(f"{where}.update", grads, state.mu, "the first moment mu")
        count_inc = _safe_increment(state.count)
        first = count_inc == 1
        sq = tree_map(lambda g: jnp.sum(g * g), grads)
        nu = tree_map(lambda s, n: jnp.where(first, s.astype(n.dtype),
                                             (1 - b2) * s + b2 * n), sq, state.nu)
        add = tree_map(lambda g, p, n: g / (jnp.sqrt(n + eps_root) + eps) + weight_decay * p,
                       grads, params, nu)
        mu = tree_map(lambda m, a: jnp.where(first, a, b1 * m + a), state.mu, add)
        mu = otu.tree_cast(mu, mu_dtype)
        return mu, ScaleByNovogradState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init, update)


# ---- factored second moments (Adafactor) ------------------------------------------------
class FactoredState(NamedTuple):
    count: Any                                 # int32 scalar
    v_row: Any                                 # per leaf: row statistics, or [1] if unfactored
    v_col: Any                                 # per leaf: column statistics, or [1]
    v: Any                                     # per leaf: full statistics, or [1] if factored


def _decay_rate_pow(i, exponent=0.8):
    """β̂_t = 1 - (t + 1)^(-exponent)  (Adafactor's increasing decay)."""
    t = jnp.asarray(i + 1, jnp.float32)
    return 1.0 - t ** (-exponent)


def _factored_dims(shape, factored, min_dim_size_to_factor):
    """The two largest axes (d1, d0) if the leaf is factored, else None."""
    if not factored or len(shape) < 2:
        return None
    sorted_dims = np.argsort(shape)
    if shape[sorted_dims[-2]] < min_dim_size_to_factor:
        return None
    return int(sorted_dims[-2]), int(sorted_dims[-1])


def scale_by_factored_rms(factored: bool = True, decay_rate: float = 0.8,
                          step_offset: int = 0, min_dim_size_to_factor: int = 128,
                          epsilon: float = 1e-30,
                          decay_rate_fn: Callable[[Any, Any], Any] = _decay_rate_pow
                          ) -> GradientTransformation:
    """Adafactor's scaling (Shazeer & Stern 2018), per leaf, β̂ = decay_rate_fn(t - offset):

    Factored (rank >= 2, second-largest axis >= min_dim_size_to_factor; d0 the largest
    axis, d1 the second largest):
        R' = β̂ · R + (1 - β̂) · mean_{d0}(g² + ε)        C' = β̂ · C + (1 - β̂) · mean_{d1}(g² + ε)
        u  = g · (R' / mean(R'))^(-½) [expanded on d0] · C'^(-½) [expanded on d1]
    Unfactored:
        v' = β̂ · v + (1 - β̂) · (g² + ε);      u = g · v'^(-½)
    Needs params (for the shapes).
    """
    where = "scale_by_factored_rms"
    _nonneg(where, epsilon=epsilon)

    def init(params):
        def one(p):
            shape, dtype = jnp.shape(p), jnp.asarray(p).dtype
            dims = _factored_dims(shape, factored, min_dim_size_to_factor)
            small = jnp.zeros((1,), dtype=dtype)
            if dims is not None:
                d1, d0 = dims
                return (jnp.zeros(shape[:d0] + shape[d0 + 1:], dtype),
                        jnp.zeros(shape[:d1] + shape[d1 + 1:], dtype), small)
            return small, small, jnp.zeros_like(p)
        out = [one(p) for p in tree_util.tree_leaves(params)]
        treedef = tree_util.tree_structure(params)
        return FactoredState(count=_zero_count(),
                             **{k: tree_util.tree_unflatten(treedef, [o[i] for o in out])
                                for i, k in enumerate(("v_row", "v_col", "v"))})

    def update(grads, state, params=None):
        _need_params(where + " (adafactor)", params)
        _check_structure(f"{where}.update", grads, params, "the params")
        g_leaves, treedef = tree_util.tree_flatten(grads)
        rows = tree_util.tree_leaves(state.v_row)
        cols = tree_util.tree_leaves(state.v_col)
        vs = tree_util.tree_leaves(state.v)
        p_leaves = tree_util.tree_leaves(params)
        decay_t = decay_rate_fn(state.count - step_offset, decay_rate)
        outs = []
        for grad, v_row, v_col, v, p in zip(g_leaves, rows, cols, vs, p_leaves):
            shape, dtype = jnp.shape(p), jnp.asarray(p).dtype
            new_row = new_col = new_v = jnp.zeros((1,), dtype=dtype)
            dims = _factored_dims(shape, factored, min_dim_size_to_factor)
            grad_sqr = grad * grad + epsilon
            if dims is not None:
                d1, d0 = dims
                new_row = (decay_t * v_row + (1.0 - decay_t) * jnp.mean(grad_sqr, axis=d0)
                           ).astype(dtype)
                new_col = (decay_t * v_col + (1.0 - decay_t) * jnp.mean(grad_sqr, axis=d1)
                           ).astype(dtype)
                reduced_d1 = d1 - 1 if d1 > d0 else d1
                row_col_mean = jnp.mean(new_row, axis=reduced_d1, keepdims=True)
                row_factor = (new_row / row_col_mean) ** -0.5
                col_factor = new_col ** -0.5
                u = (grad * jnp.expand_dims(row_factor, axis=d0)
                     * jnp.expand_dims(col_factor, axis=d1))
            else:
                new_v = (decay_t * v + (1.0 - decay_t) * grad_sqr).astype(dtype)
                u = grad * new_v ** -0.5
            outs.append((u, new_row, new_col, new_v))
        parts = [tree_util.tree_unflatten(treedef, [o[i] for o in outs]) for i in range(4)]
        return parts[0], FactoredState(count=_safe_increment(state.count), v_row=parts[1],
                                       v_col=parts[2], v=parts[3])

    return GradientTransformation(init, update)


# ---- SM3 --------------------------------------------------------------------------------
class ScaleBySM3State(NamedTuple):
    mu: Any                                    # per leaf: a list of one vector per axis
    nu: Any                                    # pytree like params: momentum


def scale_by_sm3(b1: float = 0.9, b2: float = 1.0, eps: float = 1e-8
                 ) -> GradientTransformation:
    """SM3 (Anil et al. 2019): one accumulator per axis, covering each element by the min:

        ν    = min_i μ_i [broadcast on axis i]   (μ_0 itself for rank < 2)
        a    = c · g² + β2 · ν,     c = 1 - β2 (1 if β2 = 1)
        ũ    = g / √(a + ε) where a > 0, else 0
        m'   = β1 · m + (1 - β1) · ũ;    u = m'
        μ_i' = max of a over the other axes  (a itself for rank < 2)
    Leaves must have rank >= 1 (as optax).
    """
    _beta("scale_by_sm3", "b1", b1, closed=True)
    _beta("scale_by_sm3", "b2", b2, closed=True)

    def init(params):
        for path, p in tree_util.tree_leaves_with_path(params):
            if jnp.ndim(p) == 0:
                raise ValueError(f"scale_by_sm3 (sm3): the leaf at {tree_util.keystr(path)} is "
                                 f"a scalar; SM3 keeps one accumulator per axis and needs "
                                 f"rank >= 1")
        mu = tree_map(lambda p: [jnp.zeros((jnp.shape(p)[i],), jnp.asarray(p).dtype)
                                 for i in range(jnp.ndim(p))], params)
        return ScaleBySM3State(mu, otu.tree_zeros_like(params))

    def expanded(shape, axis):
        return [1] * axis + [shape[axis]] + [1] * (len(shape) - axis - 1)

    def update(grads, state, params=None):
        _check_structure("scale_by_sm3.update", grads, state.nu, "the momentum nu")
        mu = tree_map(lambda g, v: [jnp.reshape(v[i], expanded(g.shape, i))
                                    for i in range(g.ndim)], grads, state.mu)
        c = (1.0 - b2) if b2 != 1.0 else 1.0

        def new_accum(g, v):
            if g.ndim < 2:
                return c * g ** 2 + b2 * v[0]
            return c * g ** 2 + b2 * functools.reduce(jnp.minimum, v)

        accum = tree_map(new_accum, grads, mu)
        inv = tree_map(lambda t: jnp.where(t > 0, lax.rsqrt(t + eps), 0.0), accum)
        up = tree_map(lambda g, a: g * a, grads, inv)
        nu = otu.tree_update_moment(up, state.nu, b1, 1)

        def new_mu(a, i):
            if a.ndim < 2:
                return a
            return jnp.max(a, axis=tuple(j for j in range(a.ndim) if j != i))

        mu = tree_map(lambda a: [new_mu(a, i) for i in range(a.ndim)], accum)
        return nu, ScaleBySM3State(mu=mu, nu=nu)

    return GradientTransformation(init, update)


# ---- simple stateless scalings ----------------------------------------------------------
def scale_by_sign() -> GradientTransformation:
    """u = sign(g)."""
    return GradientTransformation(init_empty_state,
                                  lambda grads, state, params=None:
                                  (tree_map(jnp.sign, grads), state))


def centralize() -> GradientTransformation:
    """Gradient centralization (Yong et al. 2020): for leaves of rank >= 2,
    u = g - mean of g over all axes but the first; other leaves unchanged."""
    def one(g):
        if g.ndim > 1:
            return g - g.mean(tuple(range(1, g.ndim)), keepdims=True)
        return g

    return GradientTransformation(init_empty_state,
                                  lambda grads, state, params=None:
                                  (tree_map(one, grads), state))


def scale_by_polyak(f_min: float = 0.0, max_learning_rate: float = 1.0, eps: float = 0.0,
                    variant: str = "sps") -> GradientTransformation:
    """Polyak step size (Loizou et al. 2021); update takes the loss as `value=`:

        gap = f(x) - f*   (max(gap, 0) with variant 'sps+')
        η   = 0 if ‖g‖² + ε <= machine eps, else min(gap / (‖g‖² + ε), max_learning_rate)
        u   = η · g
    """
    if variant not in ("sps", "sps+"):
        raise ValueError(f"scale_by_polyak: variant must be 'sps' or 'sps+', got {variant!r}")

    def update(grads, state, params=None, *, value=None, **extra_args):
        if value is None:
            raise ValueError("scale_by_polyak (polyak_sgd) needs the loss: call "
                             "tx.update(grads, state, params, value=loss)")
        grad_sq_norm = otu.tree_norm(grads, squared=True)
        gap = jnp.asarray(value - f_min).astype(grad_sq_norm.dtype)
        if variant == "sps+":
            gap = jnp.maximum(gap, 0)
        step = jnp.where(grad_sq_norm + eps <= float(np.finfo(float).eps), jnp.asarray(0.0),
                         jnp.minimum(gap / (grad_sq_norm + eps), max_learning_rate))
        return otu.tree_scale(step, grads), state

    return GradientTransformation(init_empty_state, update)
