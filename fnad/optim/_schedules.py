"""fnad.optim._schedules: learning-rate (and hyperparameter) schedules, as optax.schedules.

A schedule maps the int32 step count t (a traced scalar under jit, or a Python int) to a
scalar; it uses jnp ops only, so one jaxpr serves every step. As in optax, a linear ramp
is float32 arithmetic even with x64 (int32 / int promotes to float32 in JAX's rules), and
so is a warmup-then-cosine schedule (where() of a float32 and a weakly typed value).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import fnad.numpy as jnp

from ._base import Schedule, _check_hyper, _check_steps

__all__ = [
    "constant_schedule", "cosine_decay_schedule", "cosine_onecycle_schedule",
    "exponential_decay", "join_schedules", "linear_onecycle_schedule", "linear_schedule",
    "piecewise_constant_schedule", "piecewise_interpolate_schedule", "polynomial_schedule",
    "sgdr_schedule", "warmup_constant_schedule", "warmup_cosine_decay_schedule",
    "warmup_exponential_decay_schedule",
]


def constant_schedule(value: float) -> Schedule:
    """η(t) = value."""
    _check_hyper("constant_schedule", "value", value)
    return lambda count: value


def linear_schedule(init_value: float, end_value: float, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """Linear ramp from I to E over T steps starting at step B (a linear warmup with I = 0):

        η(t) = I + (E - I) · clip(t - B, 0, T) / T          (η = I when T = 0)
    """
    _check_steps("linear_schedule", "transition_steps", transition_steps)
    _check_steps("linear_schedule", "transition_begin", transition_begin)
    if transition_steps == 0:
        return lambda count: init_value

    def schedule(count):
        frac = 1 - jnp.clip(count - transition_begin, 0, transition_steps) / transition_steps
        return (init_value - end_value) * frac + end_value

    return schedule


def cosine_decay_schedule(init_value: float, decay_steps: int, alpha: float = 0.0,
                          exponent: float = 1.0) -> Schedule:
    """Cosine decay from I to α·I over T steps (Loshchilov & Hutter 2017):

        η(t) = I · ( (1 - α) · (½ (1 + cos(π · min(t, T) / T)))^p + α )
    """
    _check_steps("cosine_decay_schedule", "decay_steps", decay_steps, positive=True)

    def schedule(count):
        t = jnp.minimum(count, float(decay_steps))
        decay = 0.5 * (1 + jnp.cos(jnp.pi * t / float(decay_steps)))
        return init_value * ((1 - alpha) * decay ** exponent + alpha)

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """Schedule i runs from boundaries[i-1] on, fed the steps since that boundary:

        η(t) = η_i(t - b_{i-1})   for b_{i-1} <= t < b_i      (b_{-1} = 0)
    """
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"join_schedules: need one more schedule than boundaries, got "
                         f"{len(schedules)} schedules and {len(boundaries)} boundaries")

    def schedule(count):
        out = schedules[0](count)
        for b, s in zip(boundaries, schedules[1:]):
            out = jnp.where(count < b, out, s(count - b))
        return out

    return schedule


def warmup_cosine_decay_schedule(init_value: float, peak_value: float, warmup_steps: int,
                                 decay_steps: int, end_value: float = 0.0,
                                 exponent: float = 1.0) -> Schedule:
    """Linear warmup then cosine decay to a floor, as optax (seed 001's schedule):

        W = warmup_steps,  D = decay_steps (the total length, warmup included)
        η(t) = I + (P - I) · t / W                                      t < W
        η(t) = E + (P - E) · ½ (1 + cos(π · min(t - W, D - W) / (D - W)))   t >= W

    (with exponent p ≠ 1 the cosine factor is raised to p). Seed 001 is I = 0,
    P = base_lr, E = min_lr, D = total_steps.
    """
    where = "warmup_cosine_decay_schedule"
    _check_steps(where, "warmup_steps", warmup_steps)
    _check_steps(where, "decay_steps", decay_steps)
    if decay_steps <= warmup_steps:
        raise ValueError(f"{where}: decay_steps ({decay_steps}) is the total length and must "
                         f"exceed warmup_steps ({warmup_steps})")
    for name, v in (("init_value", init_value), ("peak_value", peak_value),
                    ("end_value", end_value)):
        _check_hyper(where, name, v)
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)],
        [warmup_steps])


def polynomial_schedule(init_value: float, end_value: float, power: float,
                        transition_steps: int, transition_begin: int = 0) -> Schedule:
    """Polynomial ramp from I to E over T steps starting at step B:

        η(t) = (I - E) · (1 - clip(t - B, 0, T) / T)^p + E       (η = I when T = 0)
    """
    _check_steps("polynomial_schedule", "transition_steps", transition_steps)
    _check_steps("polynomial_schedule", "transition_begin", transition_begin)
    _check_hyper("polynomial_schedule", "power", power)
    if transition_steps == 0:
        return lambda count: init_value

    def schedule(count):
        count = jnp.clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * (frac ** power) + end_value

    return schedule


def warmup_constant_schedule(init_value: float, peak_value: float,
                             warmup_steps: int) -> Schedule:
    """Linear warmup from I to P over W steps, then P."""
    return linear_schedule(init_value, peak_value, warmup_steps)


def exponential_decay(init_value: float, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: float | None = None) -> Schedule:
    """Exponential decay by `decay_rate` every T steps after step B:

        p    = (t - B) / T               (floor(p) with staircase)
        η(t) = I                         t <= B
        η(t) = I · r^p                   otherwise
        η(t) = max(η(t), E)  (r < 1)  or  min(η(t), E)  (r > 1)    when end_value E is given

    T = 0 or r = 0 give the constant I (as optax).
    """
    where = "exponential_decay"
    _check_steps(where, "transition_steps", transition_steps)
    _check_steps(where, "transition_begin", transition_begin)
    _check_hyper(where, "decay_rate", decay_rate, low=0.0)
    if transition_steps == 0 or decay_rate == 0:
        return lambda count: init_value
    clip_fn = jnp.maximum if decay_rate < 1.0 else jnp.minimum

    def schedule(count):
        decreased_count = count - transition_begin
        p = decreased_count / transition_steps
        if staircase:
            p = jnp.floor(p)
        decayed = jnp.where(decreased_count <= 0, init_value,
                            init_value * jnp.power(decay_rate, p))
        if end_value is not None:
            decayed = clip_fn(decayed, end_value)
        return decayed

    return schedule


def warmup_exponential_decay_schedule(init_value: float, peak_value: float,
                                      warmup_steps: int, transition_steps: int,
                                      decay_rate: float, transition_begin: int = 0,
                                      staircase: bool = False,
                                      end_value: float | None = None) -> Schedule:
    """Linear warmup from I to P over W steps, then exponential_decay(P, ...) fed t - W."""
    return join_schedules(
        [linear_schedule(init_value, peak_value, warmup_steps),
         exponential_decay(peak_value, transition_steps, decay_rate, transition_begin,
                           staircase, end_value)],
        [warmup_steps])


def _check_scales(where: str, boundaries_and_scales: Any) -> None:
    if boundaries_and_scales is None:
        return
    if not isinstance(boundaries_and_scales, dict):
        raise TypeError(f"{where}: boundaries_and_scales must be a dict {{step: scale}}, got "
                        f"{type(boundaries_and_scales).__name__}")
    for b, s in boundaries_and_scales.items():
        _check_steps(where, "each boundary (a key of boundaries_and_scales)", b)
        _check_hyper(where, f"the scale at boundary {b}", s)
        if s < 0:
            raise ValueError(f"{where} expects non-negative scale factors, got {s} at "
                             f"boundary {b}")


def piecewise_constant_schedule(init_value: float,
                                boundaries_and_scales: dict[int, float] | None = None
                                ) -> Schedule:
    """η(t) = I · Π_{b <= t} s_b: multiply by s_b from boundary b on (b sorted)."""
    _check_scales("piecewise_constant_schedule", boundaries_and_scales)

    def schedule(count):
        v = init_value
        for threshold, s in sorted((boundaries_and_scales or {}).items()):
            indicator = jnp.maximum(0.0, jnp.sign(threshold - count))   # 1 before b, else 0
            v = v * indicator + (1 - indicator) * s * v
        return v

    return schedule


def piecewise_interpolate_schedule(interpolate_type: str, init_value: float,
                                   boundaries_and_scales: dict[int, float] | None = None
                                   ) -> Schedule:
    """Interpolate between v_0 = I and v_k = v_{k-1} · s_k, reached at boundary b_k:

        pct  = (t - b_{k-1}) / max(b_k - b_{k-1}, 1)         on [b_{k-1}, b_k)
        η(t) = v_{k-1} + (v_k - v_{k-1}) · pct                       'linear'
        η(t) = v_k + (v_{k-1} - v_k) / 2 · (cos(π · pct) + 1)        'cosine'
        η(t) = v_last                                               t >= b_last
    """
    where = "piecewise_interpolate_schedule"
    if interpolate_type == "linear":
        def interpolate(start, end, pct):
            return (end - start) * pct + start
    elif interpolate_type == "cosine":
        def interpolate(start, end, pct):
            return end + (start - end) / 2.0 * (jnp.cos(jnp.pi * pct) + 1)
    else:
        raise ValueError(f"{where}: interpolate_type must be either 'cosine' or 'linear', "
                         f"got {interpolate_type!r}")
    _check_scales(where, boundaries_and_scales)
    if boundaries_and_scales:
        boundaries, scales = zip(*sorted(boundaries_and_scales.items()))
    else:
        boundaries, scales = (), ()

    def schedule(count):
        bounds = jnp.stack([jnp.asarray(b) for b in (0,) + boundaries])            # [K+1]
        values = jnp.cumprod(jnp.stack([jnp.asarray(v) for v in (init_value,) + scales]))
        interval_sizes = jnp.maximum(bounds[1:] - bounds[:-1], 1)                  # [K]
        indicator = jnp.logical_and(bounds[:-1] <= count, count < bounds[1:])     # [K]
        pct = (count - bounds[:-1]) / interval_sizes
        interp_vals = interpolate(values[:-1], values[1:], pct)
        return jnp.dot(indicator, interp_vals) + (bounds[-1] <= count) * values[-1]

    return schedule


def linear_onecycle_schedule(transition_steps: int, peak_value: float,
                             pct_start: float = 0.3, pct_final: float = 0.85,
                             div_factor: float = 25.0,
                             final_div_factor: float = 1e4) -> Schedule:
    """One-cycle (Smith 2018), linear: P/d → P at pct_start·T, → P/d at pct_final·T,
    → P/(d·f) at T (piecewise_interpolate_schedule('linear', ...))."""
    _check_steps("linear_onecycle_schedule", "transition_steps", transition_steps,
                 positive=True)
    return piecewise_interpolate_schedule(
        "linear", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(pct_final * transition_steps): 1.0 / div_factor,
         transition_steps: 1.0 / final_div_factor})


def cosine_onecycle_schedule(transition_steps: int, peak_value: float,
                             pct_start: float = 0.3, div_factor: float = 25.0,
                             final_div_factor: float = 1e4) -> Schedule:
    """One-cycle, cosine: P/d → P at pct_start·T → P/(d·f) at T
    (piecewise_interpolate_schedule('cosine', ...))."""
    _check_steps("cosine_onecycle_schedule", "transition_steps", transition_steps,
                 positive=True)
    return piecewise_interpolate_schedule(
        "cosine", peak_value / div_factor,
        {int(pct_start * transition_steps): div_factor,
         int(transition_steps): 1.0 / (div_factor * final_div_factor)})


def sgdr_schedule(cosine_kwargs: Iterable[dict[str, Any]]) -> Schedule:
    """Warm restarts (Loshchilov & Hutter 2017): warmup_cosine_decay_schedule(**kw_i) one
    after the other, each restarted at the sum of the earlier decay_steps."""
    cosine_kwargs = list(cosine_kwargs)
    if not cosine_kwargs:
        raise ValueError("sgdr_schedule: cosine_kwargs must hold at least one dict of "
                         "warmup_cosine_decay_schedule arguments")
    boundaries, schedules, step = [], [], 0
    for kwargs in cosine_kwargs:
        schedules.append(warmup_cosine_decay_schedule(**kwargs))
        step += kwargs["decay_steps"]
        boundaries.append(step)
    return join_schedules(schedules, boundaries[:-1])



