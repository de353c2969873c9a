"""fnad.optim._constraints: clipping, weight decay, noise and constraints on the params.

clip, clip_by_block_rms, zero_nans, keep_params_nonnegative, add_decayed_weights and
add_noise, with optax's names, states and equations. Imports only fnad's public API and
fnad.optim's own modules.
"""
from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import tree_util

from . import tree_utils as otu
from ._base import (
    EmptyState, GradientTransformation, _check_hyper, _check_structure, _need_params,
    _safe_increment, _zero_count, init_empty_state,
)
from ._wrappers import masked

__all__ = [
    "AddDecayedWeightsState", "AddNoiseState", "NonNegativeParamsState", "WeightDecaySchedule",
    "ZeroNansState", "add_decayed_weights", "add_noise", "clip", "clip_by_block_rms",
    "keep_params_nonnegative", "zero_nans",
]

tree_map = tree_util.tree_map


def clip(max_delta: float) -> GradientTransformation:
    """u = clip(g, -max_delta, max_delta) elementwise."""
    _check_hyper("clip", "max_delta", max_delta, low=0.0)

    def update(grads, state, params=None):
        return otu.tree_clip(grads, -max_delta, max_delta), state

    return GradientTransformation(init_empty_state, update)


def clip_by_block_rms(threshold: float) -> GradientTransformation:
    """Per leaf: u = g / max(1, rms(g) / threshold)."""
    _check_hyper("clip_by_block_rms", "threshold", threshold, low=0.0, low_open=True)

    def one(u):
        return u / jnp.maximum(1.0, jnp.sqrt(jnp.mean(u * u)) / threshold)

    def update(grads, state, params=None):
        return tree_map(one, grads), state

    return GradientTransformation(init_empty_state, update)


class ZeroNansState(NamedTuple):
    found_nan: Any                             # per leaf: bool scalar, a NaN in the last g


def zero_nans() -> GradientTransformation:
    """u = where(isnan(g), 0, g); the state records, per leaf, whether a NaN was found."""
    def init(params):
        return ZeroNansState(found_nan=tree_map(lambda p: jnp.asarray(False, jnp.bool_),
                                                params))

    def update(grads, state, params=None):
        found = tree_map(lambda g: jnp.any(jnp.isnan(g)), grads)
        return (tree_map(lambda g: jnp.where(jnp.isnan(g), jnp.zeros_like(g), g), grads),
                ZeroNansState(found_nan=found))

    return GradientTransformation(init, update)


NonNegativeParamsState = EmptyState


def keep_params_nonnegative() -> GradientTransformation:
    """u = -p where p + u < 0, else u: the new params are clamped at 0. Needs params."""
    def update(grads, state, params=None):
        _need_params("keep_params_nonnegative", params)
        return tree_map(lambda p, u: jnp.where((p + u) < 0.0, -p, u), params, grads), state

    return GradientTransformation(init_empty_state, update)


# ---- weight decay -----------------------------------------------------------------------
class WeightDecaySchedule(NamedTuple):
    count: Any                                 # int32 scalar: the schedule's step count


AddDecayedWeightsState = EmptyState


def add_decayed_weights(weight_decay: Any = 0.0, mask: Any = None) -> GradientTransformation:
    """Decoupled weight decay (Loshchilov & Hutter 2019): u = g + λ · p on masked leaves.

    `weight_decay` is a number or a schedule λ(t) (then the state counts steps:
    WeightDecaySchedule). `mask` is None (decay every leaf), a pytree of Python bools shaped
    like the params (or a prefix of them: `{"blocks": True, "norm": False}` covers whole
    subtrees), or a callable `params -> such a pytree`, so that norms and biases can be
    excluded; with a mask the transformation is masked(..., mask) and its state a
    MaskedState, as optax. Leaves with mask False pass through unchanged (u = g). Needs
    `params` in update.
    """
    if not callable(weight_decay):
        _check_hyper("add_decayed_weights", "weight_decay", weight_decay)

    def init(params):
        if callable(weight_decay):
            return WeightDecaySchedule(count=_zero_count())
        return EmptyState()

    def update(grads, state, params=None):
        _need_params("add_decayed_weights (weight decay of adamw, lamb, lion, ...)", params)
        _check_structure("add_decayed_weights.update (adamw)", grads, params, "the params")
        new_state = (WeightDecaySchedule(_safe_increment(state.count))
                     if callable(weight_decay) else state)
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return grads, new_state
        s = weight_decay(state.count) if callable(weight_decay) else weight_decay
        return tree_map(lambda g, p: g + s * p, grads, params), new_state

    tx = GradientTransformation(init, update)
    if mask is not None:
        return masked(tx, mask, where="adamw/add_decayed_weights")
    return tx


# ---- noise ------------------------------------------------------------------------------
class AddNoiseState(NamedTuple):
    count: Any                                 # int32 scalar
    rng_key: Any                               # a fnad.random key (uint32[2])


def add_noise(eta: float, gamma: float, key: Any = None, *,
              seed: int | None = None) -> GradientTransformation:
    """Annealed Gaussian gradient noise (Neelakantan et al. 2014):

        σ_t = √(η / t'^γ),     u = g + σ_t · N(0, 1)       (one split key per leaf)

    `key` is a fnad.random key or an int seed. The draws are those of optax with
    jax.random (fnad.random reproduces threefry's bits): same key, same noise.
    """
    _check_hyper("add_noise", "eta", eta, low=0.0)
    _check_hyper("add_noise", "gamma", gamma, low=0.0)
    if seed is not None:
        if key is not None:
            raise ValueError("add_noise: pass only one of key and seed")
        key = seed
    if key is None:
        warnings.warn("add_noise: no key given, using 0 (optax will require one)",
                      stacklevel=2)
        key = 0

    def canonical_key():
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            return fnad.random.key(int(key))
        return jnp.asarray(key)

    def init(params):
        return AddNoiseState(count=_zero_count(), rng_key=canonical_key())

    def update(grads, state, params=None):
        count_inc = _safe_increment(state.count)
        std = jnp.sqrt(eta / count_inc ** gamma)
        keys = fnad.random.split(state.rng_key)
        noise = otu.tree_random_like(keys[1], grads, sampler=fnad.random.normal)
        return otu.tree_add_scale(grads, std, noise), AddNoiseState(count=count_inc,
                                                                   rng_key=keys[0])

    return GradientTransformation(init, update)
