"""fnad.optim._transforms: optax's moment-based (elementwise) preconditioners.

Each is a GradientTransformation with optax's name, signature, state and update equations
(written in its docstring); optimizers in _alias.py chain them with a learning rate.
g is the incoming update (the gradient), t the step count after this step (t' = t + 1).
Imports only fnad's public API and fnad.optim._base / tree_utils.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import lax, tree_util

from . import tree_utils as otu
from ._base import (
    GradientTransformation, _check_hyper, _check_structure, _safe_increment, _zero_count,
)

__all__ = [
    "EmaState", "ScaleByAdaDeltaState", "ScaleByAdamState", "ScaleByAmsgradState",
    "ScaleByBeliefState", "ScaleByLionState", "ScaleByRStdDevState",
    "ScaleByRStdDevWithCountState", "ScaleByRmsState", "ScaleByRmsWithCountState",
    "ScaleByRssState", "TraceState", "ema", "scale_by_adadelta", "scale_by_adam",
    "scale_by_adamax", "scale_by_amsgrad", "scale_by_belief", "scale_by_lion", "scale_by_radam",
    "scale_by_rms", "scale_by_rss", "scale_by_stddev", "scale_by_yogi", "trace",
]

tree_map = tree_util.tree_map


def _beta(where: str, name: str, value: Any, *, closed: bool = False) -> None:
    _check_hyper(where, name, value, low=0.0, high=1.0, high_open=not closed)


def _nonneg(where: str, **values: Any) -> None:
    for name, v in values.items():
        _check_hyper(where, name, v, low=0.0)


def _dtype_or_none(dtype: Any) -> Any:
    return None if dtype is None else np.dtype(dtype)


def _nesterov_mu_hat(mu, updates, b1, count_inc):
    """m̂ = β1 · m' / (1 - β1^(t+1)) + (1 - β1) · g / (1 - β1^t)  (Dozat 2016's look-ahead)."""
    return tree_map(lambda m, g: b1 * m + (1 - b1) * g,
                    otu.tree_bias_correction(mu, b1, _safe_increment(count_inc)),
                    otu.tree_bias_correction(updates, b1, count_inc))


# ---- momentum and averages --------------------------------------------------------------
class TraceState(NamedTuple):
    trace: Any                                 # pytree like params: the momentum buffer


def trace(decay: float, nesterov: bool = False,
          accumulator_dtype: Any = None) -> GradientTransformation:
    """Heavy-ball momentum (a trace of past updates), as optax.trace:

        m' = g + β · m
        u  = m'                   (classical)
        u  = g + β · m'           (nesterov)
    """
    _check_hyper("trace", "decay (momentum)", decay, low=0.0)
    accumulator_dtype = _dtype_or_none(accumulator_dtype)

    def init(params):
        return TraceState(trace=otu.tree_zeros_like(params, dtype=accumulator_dtype))

    def update(grads, state, params=None):
        _check_structure("trace.update", grads, state.trace, "the momentum buffer")
        new_trace = tree_map(lambda g, t: g + decay * t, grads, state.trace)
        updates = tree_map(lambda g, t: g + decay * t, grads, new_trace) if nesterov \
            else new_trace
        return updates, TraceState(trace=otu.tree_cast(new_trace, accumulator_dtype))

    return GradientTransformation(init, update)


class EmaState(NamedTuple):
    count: Any                                 # int32 scalar
    ema: Any                                   # pytree like params


def ema(decay: float, debias: bool = True, accumulator_dtype: Any = None
        ) -> GradientTransformation:
    """Exponential moving average of the updates:

        e' = (1 - β) · g + β · e
        u  = e' / (1 - β^t')      (debias)      or  e'
    """
    _beta("ema", "decay", decay, closed=True)
    accumulator_dtype = _dtype_or_none(accumulator_dtype)

    def init(params):
        return EmaState(count=_zero_count(),
                        ema=otu.tree_zeros_like(params, dtype=accumulator_dtype))

    def update(grads, state, params=None):
        _check_structure("ema.update", grads, state.ema, "the moving average")
        updates = new_ema = otu.tree_update_moment(grads, state.ema, decay, 1)
        count_inc = _safe_increment(state.count)
        if debias:
            updates = otu.tree_bias_correction(new_ema, decay, count_inc)
        return updates, EmaState(count=count_inc,
                                 ema=otu.tree_cast(new_ema, accumulator_dtype))

    return GradientTransformation(init, update)


# ---- the Adam family --------------------------------------------------------------------
class ScaleByAdamState(NamedTuple):
    count: Any                                 # int32 scalar: steps taken
    mu: Any                                    # pytree like params: first moment
    nu: Any                                    # pytree like params: second moment


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0, mu_dtype: Any = None, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's preconditioning (Kingma & Ba 2015), without the learning rate:

        t' = t + 1
        m' = β1 · m + (1 - β1) · g
        v' = β2 · v + (1 - β2) · g²
        m̂  = m' / (1 - β1^t'),   v̂ = v' / (1 - β2^t')          (bias correction)
        m̂  = β1 · m' / (1 - β1^(t'+1)) + (1 - β1) · g / (1 - β1^t')    (nesterov: NAdam)
        u  = m̂ / (√(v̂ + ε_root) + ε)
    """
    where = "scale_by_adam"
    _beta(where, "b1", b1)
    _beta(where, "b2", b2)
    _nonneg(where, eps=eps, eps_root=eps_root)
    mu_dtype = _dtype_or_none(mu_dtype)

    def init(params):
        return ScaleByAdamState(count=_zero_count(),
                                mu=otu.tree_zeros_like(params, dtype=mu_dtype),
                                nu=otu.tree_zeros_like(params))

    def update(grads, state, params=None):
        _check_structure("scale_by_adam.update (adam/adamw)", grads, state.mu,
                         "the optimizer state's first moment mu")
        mu = otu.tree_update_moment(grads, state.mu, b1, 1)
        nu = otu.tree_update_moment_per_elem_norm(grads, state.nu, b2, 2)
        count_inc = _safe_increment(state.count)
        mu_hat = _nesterov_mu_hat(mu, grads, b1, count_inc) if nesterov \
            else otu.tree_bias_correction(mu, b1, count_inc)
        nu_hat = otu.tree_bias_correction(nu, b2, count_inc)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        return updates, ScaleByAdamState(count=count_inc, mu=otu.tree_cast(mu, mu_dtype),
                                         nu=otu.tree_cast_like(nu, state.nu))

    return GradientTransformation(init, update)


class ScaleByAmsgradState(NamedTuple):
    count: Any
    mu: Any
    nu: Any
    nu_max: Any                                # pytree like params: running max of v̂


def scale_by_amsgrad(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                     eps_root: float = 0.0, mu_dtype: Any = None,
                     bias_correction_mu: bool = True,
                     bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad (Reddi et al. 2018): Adam with a non-decreasing second moment:

        m', v' as Adam;   m̂ = m' / (1 - β1^t'),   v̂ = v' / (1 - β2^t')  (each optional)
        v̂max' = max(v̂max, v̂)
        u  = m̂ / (√(v̂max' + ε_root) + ε)
    """
    where = "scale_by_amsgrad"
    _beta(where, "b1", b1)
    _beta(where, "b2", b2)
    _nonneg(where, eps=eps, eps_root=eps_root)
    mu_dtype = _dtype_or_none(mu_dtype)

    def init(params):
        return ScaleByAmsgradState(count=_zero_count(),
                                   mu=otu.tree_zeros_like(params, dtype=mu_dtype),
                                   nu=otu.tree_zeros_like(params),
                                   nu_max=otu.tree_zeros_like(params))

    def update(grads, state, params=None):
        _check_structure(f"{where}.update", grads, state.nu, "the second moment nu")
        mu = otu.tree_update_moment(grads, state.mu, b1, 1)
        nu = otu.tree_update_moment_per_elem_norm(grads, state.nu, b2, 2)
        count_inc = _safe_increment(state.count)
        mu_hat = otu.tree_bias_correction(mu, b1, count_inc) if bias_correction_mu else mu
        nu_eff = otu.tree_bias_correction(nu, b2, count_inc) if bias_correction_nu else nu
        nu_max = tree_map(jnp.maximum, state.nu_max, nu_eff)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_max)
        return updates, ScaleByAmsgradState(count=count_inc, mu=otu.tree_cast(mu, mu_dtype),
                                            nu=nu, nu_max=nu_max)

    return GradientTransformation(init, update)


def scale_by_adamax(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
                    ) -> GradientTransformation:
    """AdaMax (Kingma & Ba 2015, §7), Adam with the infinity norm:

        m' = β1 · m + (1 - β1) · g,      v' = max(|g| + ε, β2 · v)
        u  = (m' / (1 - β1^t')) / v'
    State: ScaleByAdamState (nu holds v).
    """
    where = "scale_by_adamax"
    _beta(where, "b1", b1)
    _beta(where, "b2", b2)
    _nonneg(where, eps=eps)

    def init(params):
        return ScaleByAdamState(count=_zero_count(), mu=otu.tree_zeros_like(params),
                                nu=otu.tree_zeros_like(params))

    def update(grads, state, params=None):
        _check_structure(f"{where}.update", grads, state.mu, "the first moment mu")
        count_inc = _safe_increment(state.count)
        mu = otu.tree_update_moment(grads, state.mu, b1, 1)
        nu = otu.tree_update_infinity_moment(grads, state.nu, b2, eps)
        mu_hat = otu.tree_bias_correction(mu, b1, count_inc)
        return tree_map(lambda m, v: m / v, mu_hat, nu), ScaleByAdamState(count_inc, mu, nu)

    return GradientTransformation(init, update)


class ScaleByBeliefState(NamedTuple):
    count: Any
    mu: Any                                    # first moment
    nu: Any                                    # second central moment ("belief")


def scale_by_belief(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-16,
                    eps_root: float = 1e-16, *, nesterov: bool = False
                    ) -> GradientTransformation:
    """AdaBelief (Zhuang et al. 2020): Adam with the variance of g around its mean:

        m' = β1 · m + (1 - β1) · g
        s' = β2 · s + (1 - β2) · (g - m')² + ε_root
        u  = (m' / (1 - β1^t')) / (√(s' / (1 - β2^t')) + ε)      (m̂ as NAdam with nesterov)
    """
    where = "scale_by_belief"
    _beta(where, "b1", b1)
    _beta(where, "b2", b2)
    _nonneg(where, eps=eps, eps_root=eps_root)

    def init(params):
        return ScaleByBeliefState(count=_zero_count(), mu=otu.tree_zeros_like(params),
                                  nu=otu.tree_zeros_like(params))

    def update(grads, state, params=None):
        _check_structure(f"{where}.update", grads, state.mu, "the first moment mu")
        mu = otu.tree_update_moment(grads, state.mu, b1, 1)
        prediction_error = otu.tree_sub(grads, mu)
        nu = otu.tree_update_moment_per_elem_norm(prediction_error, state.nu, b2, 2)
        nu = tree_map(lambda v: v + eps_root, nu)
        count_inc = _safe_increment(state.count)
        mu_hat = _nesterov_mu_hat(mu, grads, b1, count_inc) if nesterov \
            else otu.tree_bias_correction(mu, b1, count_inc)
        nu_hat = otu.tree_bias_correction(nu, b2, count_inc)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)
        return updates, ScaleByBeliefState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init, update)


def scale_by_yogi(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-3,
                  eps_root: float = 0.0, initial_accumulator_value: float = 1e-6
                  ) -> GradientTransformation:
    """Yogi (Zaheer et al. 2018): an additive second-moment update:

        m' = β1 · m + (1 - β1) · g
        v' = v - (1 - β2) · sign(v - g²) · g²
        u  = (m' / (1 - β1^t')) / (√(v' / (1 - β2^t') + ε_root) + ε)
    m and v start at initial_accumulator_value. State: ScaleByAdamState.
    """
    where = "scale_by_yogi"
    _beta(where, "b1", b1)
    _beta(where, "b2", b2)
    _nonneg(where, eps=eps, eps_root=eps_root)

    def init(params):
        return ScaleByAdamState(
            count=_zero_count(),
            mu=otu.tree_full_like(params, initial_accumulator_value),
            nu=otu.tree_full_like(params, initial_accumulator_value))

    def update(grads, state, params=None):
        _check_structure(f"{where}.update", grads, state.mu, "the first moment mu")
        mu = otu.tree_update_moment(grads, state.mu, b1, 1)
        nu = tree_map(lambda g, v: v - (1 - b2) * jnp.sign(v - g * g) * (g * g),
                      grads, state.nu)
        count_inc = _safe_increment(state.count)
        mu_hat = otu.tree_bias_correction(mu, b1, count_inc)
        nu_hat = otu.tree_bias_correction(nu, b2, count_inc)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init, update)


def scale_by_radam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                   eps_root: float = 0.0, threshold: float = 5.0, *,
                   nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam (Liu et al. 2020): Adam once the variance estimate is reliable.

        ρ∞ = 2 / (1 - β2) - 1,     ρ = ρ∞ - 2 t' β2^t' / (1 - β2^t')
        r  = √( (ρ - 4)(ρ - 2) ρ∞ / ((ρ∞ - 4)(ρ∞ - 2) ρ) )
        u  = r · m̂ / (√(v̂ + ε_root) + ε)    if ρ >= threshold
        u  = m̂                              otherwise  (momentum SGD)
    State: ScaleByAdamState.
    """
    where = "scale_by_radam"
    _beta(where, "b1", b1)
    _beta(where, "b2", b2)
    _nonneg(where, eps=eps, eps_root=eps_root)
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def init(params):
        return ScaleByAdamState(count=_zero_count(), mu=otu.tree_zeros_like(params),
                                nu=otu.tree_zeros_like(params))

    def update(grads, state, params=None):
        _check_structure(f"{where}.update", grads, state.mu, "the first moment mu")
        mu = otu.tree_update_moment(grads, state.mu, b1, 1)
        nu = otu.tree_update_moment_per_elem_norm(grads, state.nu, b2, 2)
        count_inc = _safe_increment(state.count)
        b2t = b2 ** count_inc
        ro = ro_inf - 2 * count_inc * b2t / (1 - b2t)
        mu_hat = _nesterov_mu_hat(mu, grads, b1, count_inc) if nesterov \
            else otu.tree_bias_correction(mu, b1, count_inc)
        nu_hat = otu.tree_bias_correction(nu, b2, count_inc)
        r = jnp.sqrt((ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro))
        rect = tree_map(lambda m, v: r.astype(m.dtype) * m / (jnp.sqrt(v + eps_root) + eps),
                        mu_hat, nu_hat)
        updates = tree_map(lambda a, b: jnp.where(ro >= threshold, a, b), rect, mu_hat)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init, update)


class ScaleByLionState(NamedTuple):
    count: Any
    mu: Any                                    # pytree like params: the momentum


def scale_by_lion(b1: float = 0.9, b2: float = 0.99, mu_dtype: Any = None,
                  mode: str = "hard", smooth_beta: float = 1.0) -> GradientTransformation:
    """Lion (Chen et al. 2023): the sign of an interpolated momentum.

        x  = (1 - β1) · g + β1 · m
        u  = sign(x)                            mode "hard"
             tanh(smooth_beta · x)              mode "smooth"
             x if |x| < 1 else sign(x)          mode "refined"
        m' = (1 - β2) · g + β2 · m
    """
    where = "scale_by_lion"
    _beta(where, "b1", b1, closed=True)
    _beta(where, "b2", b2, closed=True)
    if mode not in ("hard", "smooth", "refined"):
        raise ValueError(f"{where}: mode must be 'hard', 'smooth' or 'refined', got {mode!r}")
    mu_dtype = _dtype_or_none(mu_dtype)

    def direction(x):
        if mode == "smooth":
            return jnp.tanh(smooth_beta * x)
        if mode == "refined":
            return jnp.where(jnp.abs(x) < 1.0, x, jnp.sign(x))
        return jnp.sign(x)

    def init(params):
        return ScaleByLionState(count=_zero_count(),
                                mu=otu.tree_zeros_like(params, dtype=mu_dtype))

    def update(grads, state, params=None):
        _check_structure(f"{where}.update", grads, state.mu, "the momentum mu")
        updates = tree_map(lambda g, m: direction((1.0 - b1) * g + b1 * m), grads, state.mu)
        mu = otu.tree_cast(otu.tree_update_moment(grads, state.mu, b2, 1), mu_dtype)
        return updates, ScaleByLionState(count=_safe_increment(state.count), mu=mu)

    return GradientTransformation(init, update)


# ---- RMSProp, AdaGrad, AdaDelta ---------------------------------------------------------
class ScaleByRmsState(NamedTuple):
    nu: Any                                    # pytree like params: EMA of g²


class ScaleByRmsWithCountState(NamedTuple):
    count: Any
    nu: Any


def _inv_sqrt(eps, eps_in_sqrt):
    if eps_in_sqrt:
        return lambda n: lax.rsqrt(n + eps)
    return lambda n: 1 / (jnp.sqrt(n) + eps)


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                 eps_in_sqrt: bool = True, bias_correction: bool = False
                 ) -> GradientTransformation:
    """RMSProp's scaling (Hinton 2012):

        v' = ρ · v + (1 - ρ) · g²         (v starts at initial_scale)
        v̂  = v' / (1 - ρ^t')  with bias_correction, else v'
        u  = g / √(v̂ + ε)       (eps_in_sqrt)   or   g / (√v̂ + ε)
    """
    where = "scale_by_rms"
    _beta(where, "decay", decay, closed=True)
    _nonneg(where, eps=eps, initial_scale=initial_scale)
    inv = _inv_sqrt(eps, eps_in_sqrt)

    def init(params):
        nu = otu.tree_full_like(params, initial_scale)
        if bias_correction:
            return ScaleByRmsWithCountState(count=_zero_count(), nu=nu)
        return ScaleByRmsState(nu=nu)

    def update(grads, state, params=None):
        _check_structure(f"{where}.update (rmsprop)", grads, state.nu, "the second moment nu")
        nu = otu.tree_update_moment_per_elem_norm(grads, state.nu, decay, 2)
        if bias_correction:
            count_inc = _safe_increment(state.count)
            nu_hat = otu.tree_bias_correction(nu, decay, count_inc)
        else:
            nu_hat = nu
        updates = tree_map(lambda n, g: inv(n) * g, nu_hat, grads)
        if bias_correction:
            return updates, ScaleByRmsWithCountState(count=count_inc, nu=nu)
        return updates, ScaleByRmsState(nu=nu)

    return GradientTransformation(init, update)


class ScaleByRStdDevState(NamedTuple):
    mu: Any                                    # EMA of g
    nu: Any                                    # EMA of g²


class ScaleByRStdDevWithCountState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def scale_by_stddev(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                    eps_in_sqrt: bool = True, bias_correction: bool = False
                    ) -> GradientTransformation:
    """Centered RMSProp's scaling (Graves 2013): divide by the running standard deviation.

        m' = ρ · m + (1 - ρ) · g,         v' = ρ · v + (1 - ρ) · g²
        u  = g / √(v̂ - m̂² + ε)   (eps_in_sqrt)   or   g / (√(v̂ - m̂²) + ε)
    (m̂, v̂ bias-corrected with bias_correction, else m', v').
    """
    where = "scale_by_stddev"
    _beta(where, "decay", decay, closed=True)
    _nonneg(where, eps=eps, initial_scale=initial_scale)

    def init(params):
        mu = otu.tree_zeros_like(params)
        nu = otu.tree_full_like(params, initial_scale)
        if bias_correction:
            return ScaleByRStdDevWithCountState(count=_zero_count(), mu=mu, nu=nu)
        return ScaleByRStdDevState(mu=mu, nu=nu)

    def update(grads, state, params=None):
        _check_structure(f"{where}.update (rmsprop centered)", grads, state.nu,
                         "the second moment nu")
        mu = otu.tree_update_moment(grads, state.mu, decay, 1)
        nu = otu.tree_update_moment_per_elem_norm(grads, state.nu, decay, 2)
        if bias_correction:
            count_inc = _safe_increment(state.count)
            mu_hat = otu.tree_bias_correction(mu, decay, count_inc)
            nu_hat = otu.tree_bias_correction(nu, decay, count_inc)
        else:
            mu_hat, nu_hat = mu, nu
        if eps_in_sqrt:
            scaling = tree_map(lambda m, n: lax.rsqrt(n - m * m + eps), mu_hat, nu_hat)
        else:
            scaling = tree_map(lambda m, n: 1 / (jnp.sqrt(n - m * m) + eps), mu_hat, nu_hat)
        updates = tree_map(lambda s, g: s * g, scaling, grads)
        if bias_correction:
            return updates, ScaleByRStdDevWithCountState(count=count_inc, mu=mu, nu=nu)
        return updates, ScaleByRStdDevState(mu=mu, nu=nu)

    return GradientTransformation(init, update)


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any                        # pytree like params: Σ g²


def scale_by_rss(initial_accumulator_value: float = 0.1, eps: float = 1e-7
                 ) -> GradientTransformation:
    """AdaGrad's scaling (Duchi et al. 2011):

        G' = G + g²                       (G starts at initial_accumulator_value)
        u  = g / √(G' + ε)   where G' > 0, else 0
    """
    _nonneg("scale_by_rss", initial_accumulator_value=initial_accumulator_value, eps=eps)

    def init(params):
        return ScaleByRssState(sum_of_squares=otu.tree_full_like(params,
                                                                 initial_accumulator_value))

    def update(grads, state, params=None):
        _check_structure("scale_by_rss.update (adagrad)", grads, state.sum_of_squares,
                         "the sum of squares")
        sos = tree_map(lambda g, t: g * g + t, grads, state.sum_of_squares)
        inv = tree_map(lambda t: jnp.where(t > 0, lax.rsqrt(t + eps), 0.0), sos)
        return otu.tree_mul(inv, grads), ScaleByRssState(sum_of_squares=sos)

    return GradientTransformation(init, update)


class ScaleByAdaDeltaState(NamedTuple):
    e_g: Any                                   # EMA of g²
    e_x: Any                                   # EMA of u²


def scale_by_adadelta(rho: float = 0.9, eps: float = 1e-6) -> GradientTransformation:
    """AdaDelta (Zeiler 2012):

        E[g²]' = ρ · E[g²] + (1 - ρ) · g²
        u      = √(E[Δx²] + ε) / √(E[g²]' + ε) · g
        E[Δx²]' = ρ · E[Δx²] + (1 - ρ) · u²
    """
    _beta("scale_by_adadelta", "rho", rho, closed=True)
    _nonneg("scale_by_adadelta", eps=eps)

    def init(params):
        return ScaleByAdaDeltaState(e_g=otu.tree_zeros_like(params),
                                    e_x=otu.tree_zeros_like(params))

    def update(grads, state, params=None):
        _check_structure("scale_by_adadelta.update", grads, state.e_g, "E[g²]")
        e_g = otu.tree_update_moment(grads, state.e_g, rho, 2)
        updates = tree_map(lambda g, eg, ex: (jnp.sqrt(ex + eps) / jnp.sqrt(eg + eps)) * g,
                           grads, e_g, state.e_x)
        e_x = otu.tree_update_moment(updates, state.e_x, rho, 2)
        return updates, ScaleByAdaDeltaState(e_g=e_g, e_x=e_x)

    return GradientTransformation(init, update)
