"""fnad.optim._base: the GradientTransformation type, its combinators and shared checks.

Owns GradientTransformation, EmptyState, identity, chain, named_chain, apply_updates, scale,
scale_by_schedule, scale_by_learning_rate, global_norm, clip_by_global_norm, set_to_zero,
stateless, stateless_with_tree_map, and the hyperparameter checks every other module of
fnad.optim uses. Imports only fnad's public API.
"""
from __future__ import annotations

import collections
import inspect
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import tree_util


Schedule = Callable[[Any], Any]                # int32 step count -> scalar
ScalarOrSchedule = float | Schedule
_INT32_MAX = int(np.iinfo(np.int32).max)


# ---- the optimizer type and its states ---------------------------------------------------
class GradientTransformation(NamedTuple):
    """A gradient transformation: `init(params) -> state`,
    `update(grads, state, params=None) -> (updates, new_state)`. Both are pure."""
    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]


GradientTransformationExtraArgs = GradientTransformation   # optax's name for the same pair


class EmptyState(NamedTuple):
    """The state of a stateless transformation: a pytree with no leaves."""


class ScaleByScheduleState(NamedTuple):
    count: Any                                 # int32 scalar: steps taken


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
def init_empty_state(params: Any) -> EmptyState:
    """The init of a stateless transformation."""
    return EmptyState()


def identity() -> GradientTransformation:
    """u = g: passes the gradients through, with no state."""
    return GradientTransformation(init_empty_state,
                                  lambda grads, state, params=None: (grads, state))


def _accepts_extra_args(update: Callable) -> bool:
    try:
        sig = inspect.signature(update)
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def with_extra_args_support(tx: GradientTransformation) -> GradientTransformation:
    """tx whose update accepts (and, if tx's does not take **extra_args, drops) keyword
    arguments such as `value=loss` (optax.with_extra_args_support)."""
    if _accepts_extra_args(tx.update):
        return tx

    def update(updates, state, params=None, **extra_args):
        return tx.update(updates, state, params)

    return GradientTransformation(tx.init, update)


def _is_transformation(tx: Any) -> bool:
    return callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))


def chain(*txs: GradientTransformation) -> GradientTransformation:
    """Apply `txs` in order; the state is the tuple of their states.

        u_0 = g,   u_i = txs[i].update(u_{i-1}, s_i, params, **extra_args),   u = u_n

    Keyword arguments of update (`value=loss` for polyak_sgd) go to the transformations
    whose update takes **extra_args and are dropped for the others, as in optax.
    """
    for i, tx in enumerate(txs):
        if not _is_transformation(tx):
            raise TypeError(f"chain: argument {i} is not a GradientTransformation "
                            f"(init, update pair), got {tx!r}")
    takes_extra = [_accepts_extra_args(tx.update) for tx in txs]

    def init(params):
        return tuple(tx.init(params) for tx in txs)

    def update(grads, state, params=None, **extra_args):
        if not isinstance(state, tuple) or len(state) != len(txs):
            raise ValueError(f"chain.update: expected the state of {len(txs)} chained "
                             f"transformations (a tuple from init), got {type(state).__name__}")
        new_state = []
        for tx, s, extra in zip(txs, state, takes_extra):
            grads, s = tx.update(grads, s, params, **(extra_args if extra else {}))
            new_state.append(s)
        return grads, tuple(new_state)

    return GradientTransformation(init, update)


def named_chain(*named_txs: tuple[str, GradientTransformation]) -> GradientTransformation:
    """`chain` of `(name, tx)` pairs whose state is an OrderedDict `{name: state}` in the
    given order (optax.named_chain); update's keyword arguments go to every tx."""
    names = [pair[0] if isinstance(pair, tuple) and len(pair) == 2 else None
             for pair in named_txs]
    for i, (name, pair) in enumerate(zip(names, named_txs, strict=True)):
        if not isinstance(name, str) or not _is_transformation(pair[1]):
            raise TypeError(f"named_chain: argument {i} must be a (name, "
                            f"GradientTransformation) pair, got {pair!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"named_chain: the names must be unique, got {names}")
    txs = [with_extra_args_support(tx) for _, tx in named_txs]

    def init(params):
        return collections.OrderedDict(
            (name, tx.init(params)) for name, tx in zip(names, txs, strict=True))

    def update(grads, state, params=None, **extra_args):
        new_state = collections.OrderedDict()
        for name, tx in zip(names, txs, strict=True):
            grads, new_state[name] = tx.update(grads, state[name], params, **extra_args)
        return grads, new_state

    return GradientTransformation(init, update)


def apply_updates(params: Any, updates: Any) -> Any:
    """p' = p + u leafwise, kept in each parameter's dtype."""
    _check_structure("apply_updates", updates, params, "the params")
    return tree_util.tree_map(
        lambda p, u: jnp.asarray(p + u).astype(jnp.asarray(p).dtype), params, updates)


# ---- scaling ----------------------------------------------------------------------------
def scale(step_size: Any) -> GradientTransformation:
    """u = step_size · g (no state), with the usual promotion (as optax): a Python number
    keeps g's dtype, a strongly typed float32 array (e.g. an injected learning rate) makes
    bfloat16/float16 updates float32."""
    _check_hyper("scale", "step_size", step_size)

    def update(grads, state, params=None):
        return tree_util.tree_map(lambda g: step_size * g, grads), state

    return GradientTransformation(init_empty_state, update)


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


def scale_by_learning_rate(learning_rate: ScalarOrSchedule | None = None, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """u = -η · g (descent), η a number or a schedule η(t); flip_sign=False gives +η · g;
    learning_rate None gives identity() (as optax)."""
    if learning_rate is None:
        return identity()
    _check_lr("scale_by_learning_rate", learning_rate)
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: m * learning_rate(count))
    return scale(m * learning_rate)


# ---- clipping ---------------------------------------------------------------------------
def global_norm(updates: Any):
    """‖g‖ = sqrt(Σ_leaves Σ_i |g_i|²), a scalar in the leaves' promoted dtype (bfloat16
    grads give a bfloat16 norm, as optax; an empty tree gives 0.0)."""
    sq = [jnp.sum(jnp.square(jnp.abs(x)) if jnp.iscomplexobj(x) else x * x)
          for x in tree_util.tree_leaves(updates)]
    return jnp.sqrt(sum(sq, 0))


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

    return GradientTransformation(init_empty_state, update)


def _check_steps(where: str, name: str, value: Any, *, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be an int, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{where}: {name} must be {'> 0' if positive else '>= 0'}, "
                         f"got {value}")


# ---- small stateless transformations ---------------------------------------------------
def set_to_zero() -> GradientTransformation:
    """u = 0 (freezes the parameters it is applied to, e.g. through multi_transform)."""
    def update(grads, state, params=None):
        return tree_util.tree_map(jnp.zeros_like, grads), state

    return GradientTransformation(init_empty_state, update)


def stateless(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """u = f(g, params) on whole pytrees; the state is EmptyState()."""
    if not callable(f):
        raise TypeError(f"stateless: f must be a callable (updates, params) -> updates, "
                        f"got {f!r}")

    def update(grads, state, params=None):
        return f(grads, params), EmptyState()

    return GradientTransformation(init_empty_state, update)


def stateless_with_tree_map(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """u_leaf = f(g_leaf, p_leaf) (p_leaf None when update gets no params)."""
    if not callable(f):
        raise TypeError(f"stateless_with_tree_map: f must be a callable (g, p) -> u, "
                        f"got {f!r}")

    def update(grads, state, params=None):
        if params is not None:
            return tree_util.tree_map(f, grads, params), EmptyState()
        return tree_util.tree_map(lambda g: f(g, None), grads), EmptyState()

    return GradientTransformation(init_empty_state, update)


NO_PARAMS_MSG = ("needs the params: call tx.update(grads, state, params)")


def _need_params(where: str, params: Any) -> None:
    if params is None:
        raise ValueError(f"{where} {NO_PARAMS_MSG}")
