"""fnad.optim: Optax-style optimizers, learning-rate schedules and gradient accumulation.

An optimizer is a named pair of pure functions (`GradientTransformation`):

    state            = tx.init(params)
    updates, state'  = tx.update(grads, state, params)      # params: only if tx needs them
    params'          = apply_updates(params, updates)       # p' = p + u

The state is a pytree of fnad arrays with a fixed structure (step counters are int32
scalars), so a train step that threads it works under `fnad.jit`; schedules are evaluated
on the traced step count with fnad.numpy ops, never Python branches on traced values.
Optimizers are chains of small transformations, with Optax's names and semantics (the tests
check them step for step against optax): `sgd = chain(trace, scale_by_learning_rate)`,
`adam = chain(scale_by_adam, scale_by_learning_rate)`,
`adamw = chain(scale_by_adam, add_decayed_weights, scale_by_learning_rate)`.

Written with fnad's public API only (fnad.numpy, fnad.lax, fnad.tree_util), as a user would.
Must not be imported by fnad's core modules.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax, tree_util

__all__ = [
    "EmptyState", "GradientTransformation", "MultiStepsState", "ScaleByAdamState",
    "ScaleByScheduleState", "TraceState", "accumulate_gradients", "adam", "adamw",
    "add_decayed_weights", "apply_updates", "chain", "clip_by_global_norm",
    "constant_schedule", "cosine_decay_schedule", "global_norm", "identity", "join_schedules",
    "linear_schedule", "multi_steps", "scale", "scale_by_adam", "scale_by_learning_rate",
    "scale_by_schedule", "sgd", "trace", "warmup_cosine_decay_schedule",
]

Schedule = Callable[[Any], Any]                # int32 step count -> scalar
ScalarOrSchedule = float | Schedule
_INT32_MAX = int(np.iinfo(np.int32).max)


# ---- the optimizer type and its states ---------------------------------------------------
class GradientTransformation(NamedTuple):
    """A gradient transformation: `init(params) -> state`,
    `update(grads, state, params=None) -> (updates, new_state)`. Both are pure."""
    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]


class EmptyState(NamedTuple):
    """The state of a stateless transformation: a pytree with no leaves."""


class ScaleByScheduleState(NamedTuple):
    count: Any                                 # int32 scalar: steps taken


class TraceState(NamedTuple):
    trace: Any                                 # pytree like params: the momentum buffer


class ScaleByAdamState(NamedTuple):
    count: Any                                 # int32 scalar: steps taken
    mu: Any                                    # pytree like params: first moment
    nu: Any                                    # pytree like params: second moment


class MultiStepsState(NamedTuple):
    mini_step: Any                             # int32 scalar in [0, k): micro-steps accumulated
    gradient_step: Any                         # int32 scalar: inner updates applied
    inner_opt_state: Any                       # the wrapped optimizer's state
    acc_grads: Any                             # pytree like params: running mean (or sum)


# ---- helpers ------------------------------------------------------------------------------
def _zero_count():
    return jnp.zeros([], jnp.int32)


def _safe_increment(count):
    """count + 1, saturating at the int32 maximum instead of wrapping (as optax)."""
    return jnp.where(count < _INT32_MAX, count + 1, count)


def _check_structure(where: str, grads: Any, ref: Any, ref_name: str) -> None:
    """ValueError naming `where` and the first differing key path if the trees differ."""
    if tree_util.tree_structure(grads) == tree_util.tree_structure(ref):
        return
    detail = (f"{ref_name} is {tree_util.tree_structure(ref)}, the grads are "
              f"{tree_util.tree_structure(grads)}")
    # tree_map names the first differing key path; either tree may be the deeper one.
    for first, rest, names in ((ref, grads, (ref_name, "the grads")),
                               (grads, ref, ("the grads", ref_name))):
        try:
            tree_util.tree_map(lambda *_: None, first, rest)
        except ValueError as e:
            detail = str(e).replace("tree_map rest[0]", names[1]).replace(
                "the first tree", names[0])
            break
    raise ValueError(f"{where}: the grads' pytree structure does not match {ref_name}, which "
                     f"init built from the params; pass grads shaped like the params given to "
                     f"init. {detail}")


def _concrete_float(x: Any) -> float | None:
    """float(x) for a Python/NumPy/concrete fnad number; None for a traced value."""
    try:
        return float(x)
    except fnad.ConcretizationTypeError:
        return None


def _check_hyper(where: str, name: str, value: Any, *, low: float | None = None,
                 high: float | None = None, low_open: bool = False,
                 high_open: bool = False) -> None:
    """Raise a clear error for a non-numeric or out-of-range hyperparameter."""
    if callable(value) or isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{where}: {name} must be a number, got {value!r}")
    try:
        v = _concrete_float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: {name} must be a scalar number, got "
                        f"{type(value).__name__}") from None
    if v is None:                                      # traced: checked by the caller's math
        return
    ok = math.isfinite(v)
    if low is not None:
        ok = ok and (v > low if low_open else v >= low)
    if high is not None:
        ok = ok and (v < high if high_open else v <= high)
    if not ok:
        lo = "" if low is None else f"{'(' if low_open else '['}{low}, "
        hi = "" if high is None else f"{high}{')' if high_open else ']'}"
        rng = f"{lo or '(-inf, '}{hi or 'inf)'}"
        raise ValueError(f"{where}: {name} must be a finite number in {rng}, got {value!r}")


def _check_lr(where: str, learning_rate: Any) -> None:
    if callable(learning_rate):
        return
    _check_hyper(where, "learning_rate (a number or a schedule: a callable of the step "
                 "count)", learning_rate, low=0.0)


def _at_least_f32(dtype) -> np.dtype:
    """dtype promoted to at least float32 (bf16/f16 accumulate in f32, f64 stays f64)."""
    return np.promote_types(np.dtype(dtype), np.float32)


# ---- combinators ------------------------------------------------------------------------
def identity() -> GradientTransformation:
    """u = g: passes the gradients through, with no state."""
    return GradientTransformation(lambda params: EmptyState(),
                                  lambda grads, state, params=None: (grads, state))


def chain(*txs: GradientTransformation) -> GradientTransformation:
    """Apply `txs` in order; the state is the tuple of their states.

        u_0 = g,   u_i = txs[i].update(u_{i-1}, s_i, params),   u = u_n
    """
    for i, tx in enumerate(txs):
        if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
            raise TypeError(f"chain: argument {i} is not a GradientTransformation "
                            f"(init, update pair), got {tx!r}")

    def init(params):
        return tuple(tx.init(params) for tx in txs)

    def update(grads, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(txs):
            raise ValueError(f"chain.update: expected the state of {len(txs)} chained "
                             f"transformations (a tuple from init), got {type(state).__name__}")
        new_state = []
        for tx, s in zip(txs, state):
            grads, s = tx.update(grads, s, params)
            new_state.append(s)
        return grads, tuple(new_state)

    return GradientTransformation(init, update)


def apply_updates(params: Any, updates: Any) -> Any:
    """p' = p + u leafwise, kept in each parameter's dtype."""
    _check_structure("apply_updates", updates, params, "the params")
    return tree_util.tree_map(
        lambda p, u: jnp.asarray(p + u).astype(jnp.asarray(p).dtype), params, updates)


# ---- scaling ----------------------------------------------------------------------------
def scale(step_size: Any) -> GradientTransformation:
    """u = step_size · g (no state)."""
    _check_hyper("scale", "step_size", step_size)

    def update(grads, state, params=None):
        return tree_util.tree_map(
            lambda g: jnp.asarray(step_size, dtype=g.dtype) * g, grads), state

    return GradientTransformation(lambda params: EmptyState(), update)


def scale_by_schedule(step_size_fn: Schedule) -> GradientTransformation:
    """u = η(t) · g, with t the number of earlier updates (int32, starts at 0).

        state: t;   t' = t + 1
    """
    if not callable(step_size_fn):
        raise TypeError(f"scale_by_schedule: step_size_fn must be a callable of the step "
                        f"count, got {step_size_fn!r}")

    def init(params):
        return ScaleByScheduleState(count=_zero_count())

    def update(grads, state, params=None):
        step_size = step_size_fn(state.count)
        updates = tree_util.tree_map(
            lambda g: jnp.asarray(step_size, dtype=g.dtype) * g, grads)
        return updates, ScaleByScheduleState(count=_safe_increment(state.count))

    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate: ScalarOrSchedule, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """u = -η · g (descent), η a number or a schedule η(t); flip_sign=False gives +η · g."""
    _check_lr("scale_by_learning_rate", learning_rate)
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    return scale(m * learning_rate)


# ---- momentum and Adam ------------------------------------------------------------------
def trace(decay: float, nesterov: bool = False) -> GradientTransformation:
    """Heavy-ball momentum (a trace of past updates), as optax.trace:

        m' = g + β · m
        u  = m'                   (classical)
        u  = g + β · m'           (nesterov)
    """
    _check_hyper("trace", "decay (momentum)", decay, low=0.0)

    def init(params):
        return TraceState(trace=tree_util.tree_map(jnp.zeros_like, params))

    def update(grads, state, params=None):
        _check_structure("trace.update", grads, state.trace, "the momentum buffer")
        new_trace = tree_util.tree_map(lambda g, t: g + decay * t, grads, state.trace)
        updates = (tree_util.tree_map(lambda g, t: g + decay * t, grads, new_trace)
                   if nesterov else new_trace)
        return updates, TraceState(trace=new_trace)

    return GradientTransformation(init, update)


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adam's preconditioning (Kingma & Ba 2015), without the learning rate:

        t' = t + 1
        m' = β1 · m + (1 - β1) · g
        v' = β2 · v + (1 - β2) · g²
        m̂  = m' / (1 - β1^t'),   v̂ = v' / (1 - β2^t')          (bias correction)
        u  = m̂ / (√(v̂ + ε_root) + ε)
    """
    _check_hyper("scale_by_adam", "b1", b1, low=0.0, high=1.0, high_open=True)
    _check_hyper("scale_by_adam", "b2", b2, low=0.0, high=1.0, high_open=True)
    _check_hyper("scale_by_adam", "eps", eps, low=0.0)
    _check_hyper("scale_by_adam", "eps_root", eps_root, low=0.0)

    def init(params):
        return ScaleByAdamState(count=_zero_count(),
                                mu=tree_util.tree_map(jnp.zeros_like, params),
                                nu=tree_util.tree_map(jnp.zeros_like, params))

    def update(grads, state, params=None):
        _check_structure("scale_by_adam.update (adam/adamw)", grads, state.mu,
                         "the optimizer state's first moment mu")
        mu = tree_util.tree_map(lambda g, m: (1 - b1) * g + b1 * m, grads, state.mu)
        nu = tree_util.tree_map(lambda g, v: (1 - b2) * (g * g) + b2 * v, grads, state.nu)
        count = _safe_increment(state.count)
        # 1 - β^t in the default float, then cast: β^t rounded in bf16 could be exactly 1.
        bc1, bc2 = 1 - b1 ** count, 1 - b2 ** count
        updates = tree_util.tree_map(
            lambda m, v: (m / bc1.astype(m.dtype))
            / (jnp.sqrt(v / bc2.astype(v.dtype) + eps_root) + eps), mu, nu)
        return updates, ScaleByAdamState(count=count, mu=mu, nu=nu)

    return GradientTransformation(init, update)


def add_decayed_weights(weight_decay: float = 0.0, mask: Any = None) -> GradientTransformation:
    """Decoupled weight decay (Loshchilov & Hutter 2019): u = g + λ · p on masked leaves.

    `mask` is None (decay every leaf), a pytree of Python bools shaped like the params (or a
    prefix of them: `{"blocks": True, "norm": False}` covers whole subtrees), or a callable
    `params -> such a pytree`, so that norms and biases can be excluded. Leaves with
    mask False pass through unchanged (u = g). Needs `params` in update.
    """
    _check_hyper("add_decayed_weights", "weight_decay", weight_decay, low=0.0)
    if mask is not None and not callable(mask):
        _mask_flags(mask, mask)                         # validate the leaves now

    def update(grads, state, params=None):
        if params is None:
            raise ValueError("add_decayed_weights (adamw's weight decay) needs the params: "
                             "call tx.update(grads, state, params)")
        _check_structure("add_decayed_weights.update (adamw)", grads, params, "the params")
        g_leaves, treedef = tree_util.tree_flatten(grads)
        p_leaves = tree_util.tree_leaves(params)
        if mask is None:
            flags = [True] * len(p_leaves)
        else:
            flags = _mask_flags(mask(params) if callable(mask) else mask, params)
        out = [g + weight_decay * p if f else g for g, p, f in zip(g_leaves, p_leaves, flags)]
        return tree_util.tree_unflatten(treedef, out), state

    return GradientTransformation(lambda params: EmptyState(), update)


def _mask_flags(mask: Any, params: Any) -> list[bool]:
    """One Python bool per leaf of params, from a mask pytree (or prefix) of bools."""
    try:
        flags = tree_util.broadcast_prefix(mask, params)
    except ValueError as e:
        raise ValueError(f"adamw/add_decayed_weights: the mask must be a pytree of bools "
                         f"shaped like the params (or a prefix of them): {e}") from None
    for path, f in tree_util.tree_leaves_with_path(mask, is_leaf=lambda x: x is None):
        if not isinstance(f, (bool, np.bool_)):
            raise TypeError(f"adamw/add_decayed_weights: mask leaf at "
                            f"{tree_util.keystr(path) or '<root>'} must be a Python bool (one "
                            f"decision per parameter array), got {f!r}")
    return [bool(f) for f in flags]


# ---- clipping ---------------------------------------------------------------------------
def global_norm(tree: Any):
    """‖g‖ = sqrt(Σ_leaves Σ_i |g_i|²), a scalar."""
    sq = [jnp.sum(jnp.square(jnp.abs(x)) if jnp.iscomplexobj(x) else x * x)
          for x in tree_util.tree_leaves(tree)]
    return jnp.sqrt(sum(sq, jnp.zeros([])))


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Rescale the whole gradient so its global norm is at most max_norm (no state):

        u = g                        if ‖g‖ < max_norm
        u = g · max_norm / ‖g‖       otherwise
    """
    _check_hyper("clip_by_global_norm", "max_norm", max_norm, low=0.0, low_open=True)

    def update(grads, state, params=None):
        g_norm = global_norm(grads)
        keep = g_norm < max_norm
        updates = tree_util.tree_map(
            lambda g: jnp.where(keep, g, (g / g_norm.astype(g.dtype)) * max_norm), grads)
        return updates, state

    return GradientTransformation(lambda params: EmptyState(), update)


# ---- optimizers -------------------------------------------------------------------------
def sgd(learning_rate: ScalarOrSchedule, momentum: float = 0.0,
        nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum β:

        β = 0:       u = -η(t) · g
        momentum:    m' = g + β · m;            u = -η(t) · m'
        nesterov:    m' = g + β · m;            u = -η(t) · (g + β · m')
    """
    _check_lr("sgd", learning_rate)
    _check_hyper("sgd", "momentum", momentum, low=0.0)
    inner = trace(momentum, nesterov) if (momentum or nesterov) else identity()
    return chain(inner, scale_by_learning_rate(learning_rate))


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8, eps_root: float = 0.0) -> GradientTransformation:
    """Adam (Kingma & Ba 2015):

        t' = t + 1
        m' = β1 · m + (1 - β1) · g,      v' = β2 · v + (1 - β2) · g²
        m̂  = m' / (1 - β1^t'),           v̂  = v' / (1 - β2^t')
        u  = -η(t) · m̂ / (√(v̂ + ε_root) + ε)

    η(t) is the learning rate (or schedule) at the step count t before this update.
    """
    _check_lr("adam", learning_rate)
    return chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate))


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, weight_decay: float = 1e-4, mask: Any = None,
          eps_root: float = 0.0) -> GradientTransformation:
    """AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019), as optax.adamw:

        t' = t + 1
        m' = β1 · m + (1 - β1) · g,      v' = β2 · v + (1 - β2) · g²
        m̂  = m' / (1 - β1^t'),           v̂  = v' / (1 - β2^t')
        u  = -η(t) · ( m̂ / (√(v̂ + ε_root) + ε) + λ · p )

    The decay λ · p is scaled by the learning rate but not by the Adam preconditioner
    (seed 001: p ← p − lr · (m̂ / (√v̂ + ε) + wd · p)). `mask` (pytree of bools, or a callable
    params -> pytree of bools) selects the leaves that decay; λ · p is dropped elsewhere
    (norm scales, biases). `update` needs `params`.
    """
    _check_lr("adamw", learning_rate)
    return chain(scale_by_adam(b1, b2, eps, eps_root),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


# ---- schedules --------------------------------------------------------------------------
# A schedule maps the int32 step count t (a traced scalar under jit, or a Python int) to a
# scalar; it uses jnp ops only, so one jaxpr serves every step. As in optax, a linear ramp
# is float32 arithmetic even with x64 (int32 / int promotes to float32 in JAX's rules), and
# so is a warmup-then-cosine schedule (where() of a float32 and a weakly typed value).

def _check_steps(where: str, name: str, value: Any, *, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{where}: {name} must be {'> 0' if positive else '>= 0'}, "
                         f"got {value}")


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


# ---- gradient accumulation --------------------------------------------------------------
def multi_steps(tx: GradientTransformation, every_k: int, *, use_grad_mean: bool = True,
                accumulator_dtype: Any = None) -> GradientTransformation:
    """Accumulate k micro-batch gradients, then apply `tx` once (as optax.MultiSteps):

        n = mini_step (0 ≤ n < k)
        a' = a + (g - a) / (n + 1)        (running mean; a + g with use_grad_mean=False)
        emit = (n == k - 1)
        u  = tx.update(a', s).updates  if emit  else 0
        s' = tx.update(a', s).state    if emit  else s
        a'' = 0 if emit else a',   n' = 0 if emit else n + 1

    Selection is by jnp.where on the traced mini_step, so the step jits once. The
    accumulator is kept in at least float32 (bf16/f16 grads accumulate in f32), or in
    `accumulator_dtype`.
    """
    if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
        raise TypeError(f"multi_steps: tx must be a GradientTransformation, got {tx!r}")
    _check_steps("multi_steps", "every_k", every_k, positive=True)

    def acc_dtype(x):
        return (np.dtype(accumulator_dtype) if accumulator_dtype is not None
                else _at_least_f32(jnp.asarray(x).dtype))

    def init(params):
        return MultiStepsState(
            mini_step=_zero_count(), gradient_step=_zero_count(),
            inner_opt_state=tx.init(params),
            acc_grads=tree_util.tree_map(lambda p: jnp.zeros_like(p, dtype=acc_dtype(p)),
                                         params))

    def update(grads, state, params=None):
        _check_structure("multi_steps.update", grads, state.acc_grads,
                         "the gradient accumulator")
        n = state.mini_step
        if use_grad_mean:
            acc = tree_util.tree_map(
                lambda g, a: a + (g.astype(a.dtype) - a) / (n + 1).astype(a.dtype),
                grads, state.acc_grads)
        else:
            acc = tree_util.tree_map(lambda g, a: a + g.astype(a.dtype), grads, state.acc_grads)
        acc_g = tree_util.tree_map(lambda a, g: a.astype(g.dtype), acc, grads)
        inner_updates, inner_state = tx.update(acc_g, state.inner_opt_state, params)
        emit = n == every_k - 1
        new_state = MultiStepsState(
            mini_step=jnp.where(emit, 0, n + 1).astype(jnp.int32),
            gradient_step=jnp.where(emit, _safe_increment(state.gradient_step),
                                    state.gradient_step),
            inner_opt_state=tree_util.tree_map(
                lambda old, new: jnp.where(emit, new, old).astype(jnp.asarray(old).dtype),
                state.inner_opt_state, inner_state),
            acc_grads=tree_util.tree_map(lambda a: jnp.where(emit, jnp.zeros_like(a), a), acc))
        updates = tree_util.tree_map(lambda u: jnp.where(emit, u, jnp.zeros_like(u)),
                                     inner_updates)
        return updates, new_state

    return GradientTransformation(init, update)


def accumulate_gradients(loss_fn: Callable, params: Any, micro_batches: Any, *,
                         has_aux: bool = False):
    """Mean loss and gradient over M micro-batches, one at a time with `lax.scan`.

    `micro_batches` is a pytree whose leaves all have a leading micro-batch axis [M, ...];
    `loss_fn(params, batch)` takes one slice. Returns `(loss, grads)` like
    `fnad.value_and_grad(loss_fn)`, or `((loss, aux), grads)` with has_aux, aux stacked
    over micro-batches [M, ...]:

        L = (1/M) Σ_m L_m,     ∇L = (1/M) Σ_m ∇L_m

    For a mean loss over equal micro-batches this is the full batch's loss and gradient,
    with the activation memory of one micro-batch. Sums are kept in at least float32.
    """
    if not callable(loss_fn):
        raise TypeError(f"accumulate_gradients: loss_fn must be callable, got {loss_fn!r}")
    leaves = tree_util.tree_leaves(micro_batches)
    if not leaves:
        raise ValueError("accumulate_gradients: micro_batches has no arrays to scan over")
    sizes = {tuple(jnp.shape(x)[:1]) for x in leaves}
    if len(sizes) != 1 or () in sizes:
        raise ValueError(f"accumulate_gradients: every leaf of micro_batches needs the same "
                         f"leading micro-batch axis [M, ...]; got leading sizes "
                         f"{sorted(s[0] if s else 'scalar' for s in sizes)}")
    (M,) = sizes.pop()
    vg = fnad.value_and_grad(loss_fn, has_aux=has_aux)

    def loss_of(out):
        return out[0] if has_aux else out

    first = tree_util.tree_map(lambda x: x[0], micro_batches)
    out_shape, g_shape = fnad.eval_shape(vg, params, first)
    loss_sd = loss_of(out_shape)
    zeros = tree_util.tree_map(lambda s: jnp.zeros(s.shape, _at_least_f32(s.dtype)),
                               (loss_sd, g_shape))

    def body(carry, batch):
        loss_sum, g_sum = carry
        out, g = vg(params, batch)
        loss_sum = loss_sum + loss_of(out).astype(loss_sum.dtype)
        g_sum = tree_util.tree_map(lambda s, x: s + x.astype(s.dtype), g_sum, g)
        return (loss_sum, g_sum), (out[1] if has_aux else None)

    (loss_sum, g_sum), aux = lax.scan(body, zeros, micro_batches)
    loss = (loss_sum / M).astype(loss_sd.dtype)
    grads = tree_util.tree_map(lambda s, sd: (s / M).astype(sd.dtype), g_sum, g_shape)
    return ((loss, aux), grads) if has_aux else (loss, grads)
