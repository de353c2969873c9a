"""fnad.optim._wrappers: transformations that wrap other transformations.

masked / multi_transform (send parts of the pytree to different transformations),
apply_if_finite (skip non-finite steps), inject_hyperparams (hyperparameters in the state,
changeable between steps), multi_steps (gradient accumulation) and accumulate_gradients
(a scan over micro-batches). Imports only fnad's public API and fnad.optim._base.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax, tree_util

from . import tree_utils as otu
from ._base import (
    GradientTransformation, _at_least_f32, _check_steps,
    _check_structure, _is_transformation, _safe_increment, _zero_count,
    with_extra_args_support,
)

__all__ = [
    "ApplyIfFiniteState", "InjectHyperparamsState", "InjectStatefulHyperparamsState",
    "MaskedNode", "MaskedState", "MultiSteps", "MultiStepsState", "MultiTransformState",
    "PartitionState",
    "WrappedScheduleState", "accumulate_gradients", "apply_if_finite", "inject_hyperparams",
    "inject_stateful_hyperparams", "masked", "multi_steps", "multi_transform", "partition",
]


class MultiStepsState(NamedTuple):
    mini_step: Any                             # int32 scalar in [0, k): micro-steps accumulated
    gradient_step: Any                         # int32 scalar: inner updates applied
    inner_opt_state: Any                       # the wrapped optimizer's state
    acc_grads: Any                             # pytree like params: running mean (or sum)
    skip_state: Any = ()                       # as optax (always () here)


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
    if not _is_transformation(tx):
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
        # Summed in the promoted dtype of grad and accumulator (as optax): a bfloat16
        # accumulator_dtype rounds what is stored, not the mean handed to tx at the emit.
        if use_grad_mean:
            acc = tree_util.tree_map(
                lambda g, a: a + (g - a) / (n + 1).astype(jnp.result_type(g, a)),
                grads, state.acc_grads)
        else:
            acc = tree_util.tree_map(lambda g, a: a + g, grads, state.acc_grads)
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
            acc_grads=tree_util.tree_map(
                lambda a, old: jnp.where(emit, jnp.zeros_like(a), a).astype(old.dtype),
                acc, state.acc_grads))
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


# ---- masked -----------------------------------------------------------------------------
class MaskedState(NamedTuple):
    """The state of masked(inner, mask): inner's state, built on the masked params."""
    inner_state: Any


class MaskedNode(NamedTuple):
    """Stands for a masked-out leaf (or subtree) inside a masked transformation: an empty
    pytree node, so the inner transformation neither sees nor keeps state for it."""


def _check_mask_leaves(where: str, mask: Any) -> None:
    for path, f in tree_util.tree_leaves_with_path(mask, is_leaf=lambda x: x is None):
        if not isinstance(f, (bool, np.bool_)):
            raise TypeError(f"{where}: mask leaf at {tree_util.keystr(path) or '<root>'} must "
                            f"be a Python bool (one decision per parameter array), got {f!r}")


def _mask_tree(where: str, mask: Any, tree: Any) -> Any:
    mask_tree = mask(tree) if callable(mask) else mask
    _check_mask_leaves(where, mask_tree)
    try:
        tree_util.broadcast_prefix(mask_tree, tree)
    except ValueError as e:
        raise ValueError(f"{where}: the mask must be a pytree of bools shaped like the params "
                         f"(or a prefix of them): {e}") from None
    return mask_tree


def _apply_mask(pytree: Any, mask_tree: Any) -> Any:
    return tree_util.tree_map(lambda m, p: p if m else MaskedNode(), mask_tree, pytree)


def masked(inner: GradientTransformation, mask: Any, *,
           mask_compatible_extra_args: bool = False,
           where: str = "masked") -> GradientTransformation:
    """Apply `inner` only where `mask` is True; other leaves pass through unchanged.

        u_leaf = inner(g)_leaf    if mask_leaf
        u_leaf = g_leaf           otherwise

    `mask` is a pytree of Python bools shaped like the params (or a prefix of them:
    `{"blocks": True, "norm": False}` covers whole subtrees), or a callable
    `params -> such a pytree` (called on the updates in update, as optax). inner sees the
    tree with masked-out leaves replaced by MaskedNode() (no leaves), so its state holds
    nothing for them: `MaskedState(inner_state=inner.init(masked_params))`. With
    mask_compatible_extra_args, keyword arguments of update shaped like the updates are
    masked too.
    """
    if not _is_transformation(inner):
        raise TypeError(f"{where}: inner must be a GradientTransformation, got {inner!r}")
    if not callable(mask):
        _check_mask_leaves(where, mask)
    inner = with_extra_args_support(inner)

    def init(params):
        return MaskedState(inner_state=inner.init(
            _apply_mask(params, _mask_tree(where, mask, params))))

    def update(grads, state, params=None, **extra_args):
        mask_tree = _mask_tree(where, mask, grads)
        masked_params = None if params is None else _apply_mask(params, mask_tree)
        if mask_compatible_extra_args:
            structure = tree_util.tree_structure(grads)
            extra_args = {k: _apply_mask(v, mask_tree)
                          if tree_util.tree_structure(v) == structure else v
                          for k, v in extra_args.items()}
        new_masked, inner_state = inner.update(_apply_mask(grads, mask_tree),
                                               state.inner_state, masked_params, **extra_args)
        new = tree_util.tree_map(lambda m, new_u, old_u: new_u if m else old_u,
                                 mask_tree, new_masked, grads)
        return new, MaskedState(inner_state=inner_state)

    return GradientTransformation(init, update)


# ---- multi_transform --------------------------------------------------------------------
class PartitionState(NamedTuple):
    inner_states: Mapping[Hashable, Any]       # label -> MaskedState of that transformation


MultiTransformState = PartitionState


def partition(transforms: Mapping[Hashable, GradientTransformation], param_labels: Any, *,
              mask_compatible_extra_args: bool = False) -> GradientTransformation:
    """Send each leaf to the transformation its label names (optax.partition, alias
    multi_transform): `param_labels` is a pytree of labels shaped like the params (or a
    prefix), or a callable params -> such a pytree. Each transformation runs as
    masked(tx, labels == its key); the state is PartitionState({label: MaskedState})."""
    if not isinstance(transforms, Mapping):
        raise TypeError(f"multi_transform: transforms must be a dict {{label: "
                        f"GradientTransformation}}, got {type(transforms).__name__}")
    for k, tx in transforms.items():
        if not _is_transformation(tx):
            raise TypeError(f"multi_transform: transforms[{k!r}] is not a "
                            f"GradientTransformation, got {tx!r}")

    def labels_of(tree):
        labels = param_labels(tree) if callable(param_labels) else param_labels
        label_set = set(tree_util.tree_leaves(labels))
        if not label_set.issubset(transforms.keys()):
            missing = ", ".join(sorted(map(repr, label_set - set(transforms))))
            raise ValueError(f"multi_transform: some parameters have no transformation: labels "
                             f"[{missing}] are not keys of transforms "
                             f"[{', '.join(sorted(map(repr, transforms)))}]")
        return labels

    def masked_tx(labels, group):
        mask = tree_util.tree_map(lambda label: label == group, labels)
        return masked(transforms[group], mask,
                      mask_compatible_extra_args=mask_compatible_extra_args,
                      where=f"multi_transform[{group!r}]")

    def init(params):
        labels = labels_of(params)
        return PartitionState({g: masked_tx(labels, g).init(params) for g in transforms})

    def update(grads, state, params=None, **extra_args):
        labels = labels_of(grads)
        new_states = {}
        for g in transforms:
            grads, new_states[g] = masked_tx(labels, g).update(
                grads, state.inner_states[g], params, **extra_args)
        return grads, PartitionState(new_states)

    return GradientTransformation(init, update)


multi_transform = partition


# ---- apply_if_finite --------------------------------------------------------------------
class ApplyIfFiniteState(NamedTuple):
    notfinite_count: Any                       # int32: consecutive non-finite steps
    last_finite: Any                           # bool: was the last step finite
    total_notfinite: Any                       # int32: non-finite steps so far
    inner_state: Any


def apply_if_finite(inner: GradientTransformation,
                    max_consecutive_errors: int) -> GradientTransformation:
    """Skip (u = 0, inner state kept) steps whose gradients hold a NaN or inf, unless more
    than max_consecutive_errors came in a row (then the step is applied anyway):

        finite = all(isfinite(g))
        n'     = 0 if finite else n + 1
        apply  = finite or n' > max_consecutive_errors
    """
    if not _is_transformation(inner):
        raise TypeError(f"apply_if_finite: inner must be a GradientTransformation, "
                        f"got {inner!r}")
    _check_steps("apply_if_finite", "max_consecutive_errors", max_consecutive_errors)
    inner = with_extra_args_support(inner)

    def init(params):
        return ApplyIfFiniteState(notfinite_count=_zero_count(),
                                  last_finite=jnp.asarray(True, jnp.bool_),
                                  total_notfinite=_zero_count(),
                                  inner_state=inner.init(params))

    def update(grads, state, params=None, **extra_args):
        leaves = tree_util.tree_leaves(grads)
        isfinite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in leaves])) \
            if leaves else jnp.asarray(True)
        notfinite_count = jnp.where(isfinite, jnp.zeros([], jnp.int32),
                                    _safe_increment(state.notfinite_count))
        apply = jnp.logical_or(isfinite, notfinite_count > max_consecutive_errors)
        new_u, new_s = inner.update(grads, state.inner_state, params, **extra_args)
        # select, not branch: one jaxpr; the rejected branch's NaNs are never read
        updates = tree_util.tree_map(lambda u: jnp.where(apply, u, jnp.zeros_like(u)), new_u)
        inner_state = tree_util.tree_map(
            lambda new, old: jnp.where(apply, new, old).astype(jnp.asarray(old).dtype),
            new_s, state.inner_state)
        return updates, ApplyIfFiniteState(
            notfinite_count=notfinite_count, last_finite=isfinite,
            total_notfinite=jnp.where(isfinite, state.total_notfinite,
                                      _safe_increment(state.total_notfinite)),
            inner_state=inner_state)

    return GradientTransformation(init, update)


# ---- inject_hyperparams -----------------------------------------------------------------
class InjectHyperparamsState(NamedTuple):
    count: Any                                 # int32 scalar
    hyperparams: dict[str, Any]
    inner_state: Any


class InjectStatefulHyperparamsState(NamedTuple):
    count: Any                                 # int32 scalar: steps taken
    hyperparams: dict[str, Any]                # name -> current value (an array)
    hyperparams_states: dict[str, Any]         # name -> WrappedScheduleState, for schedules
    inner_state: Any                           # the inner optimizer's state


class WrappedScheduleState(NamedTuple):
    count: Any                                 # int32 scalar: the schedule's step count


def _convert_floats(x: Any, dtype: Any) -> Any:
    """Python / NumPy floats and weakly typed fnad floats to dtype; other values as they are."""
    if getattr(x, "weak_type", None) is False:   # a strongly typed fnad array, or tracer
        return x
    current = x.dtype if hasattr(x, "dtype") else np.dtype(type(x))
    if jnp.issubdtype(current, jnp.floating):           # jnp's: bfloat16 counts as a float
        return jnp.asarray(x, dtype=dtype)
    return x


def inject_hyperparams(inner_factory: Callable[..., GradientTransformation],
                       static_args: str | Iterable[str] = (),
                       hyperparam_dtype: Any = None) -> Callable[..., GradientTransformation]:
    """Wrap an optimizer factory so that its numeric hyperparameters live in the state:

        tx = inject_hyperparams(adam)(learning_rate=sched, b1=0.9)
        state.hyperparams["learning_rate"]      # the value used at the last step
        state = state._replace(hyperparams={**state.hyperparams, "b1": jnp.asarray(0.8)})

    Numbers (int, float, arrays) become arrays in `state.hyperparams` (floats in
    hyperparam_dtype, default the params' highest float dtype) and can be changed between
    steps, also under jit; callables other than those named in `static_args` are schedules
    of the step count, evaluated each step into `hyperparams`; bools, strings and
    `static_args` stay Python values. The inner transformation is rebuilt each step from
    the current values (as optax), so its math sees traced hyperparameters under jit.
    """
    static = {static_args} if isinstance(static_args, str) else set(static_args)
    sig = inspect.signature(inner_factory)
    if not static.issubset(sig.parameters):
        raise ValueError(f"inject_hyperparams: static_args {sorted(static)} must name "
                         f"parameters of {getattr(inner_factory, '__name__', inner_factory)}, "
                         f"whose parameters are {sorted(sig.parameters)}")

    @functools.wraps(inner_factory)
    def wrapped(*args, **kwargs) -> GradientTransformation:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"inject_hyperparams({getattr(inner_factory, '__name__', '')}): "
                            f"{e}") from None
        bound.apply_defaults()
        sched_hps, numeric_hps, other_hps = {}, {}, {}
        for name, value in bound.arguments.items():
            if name in static or isinstance(value, bool):
                other_hps[name] = value
            elif callable(value):
                sched_hps[name] = value
            elif isinstance(value, (int, float, np.ndarray, np.number, fnad.Array)):
                numeric_hps[name] = value
            else:
                other_hps[name] = value
        inner_factory(**bound.arguments)                  # fail now on bad hyperparameters

        def hp_dtype(params):
            if hyperparam_dtype is not None:
                return hyperparam_dtype
            return otu.tree_dtype(params, "highest") if params is not None else np.float32

        def init(params):
            dtype = hp_dtype(params)
            hparams = {k: jnp.asarray(_convert_floats(v, dtype)) for k, v in numeric_hps.items()}
            h_states = {k: WrappedScheduleState(count=_zero_count()) for k in sched_hps}
            hparams.update({k: _convert_floats(f(h_states[k].count), dtype)
                            for k, f in sched_hps.items()})
            try:
                inner = inner_factory(**other_hps, **hparams)
            except ValueError as e:
                if np.dtype(dtype).itemsize >= 4:
                    raise
                # e.g. adam's b2=0.999 is 1.0 in bfloat16 (optax goes on and returns NaN)
                why = "the params' dtype" if hyperparam_dtype is None else "hyperparam_dtype"
                raise ValueError(f"{e}; inject_hyperparams cast the hyperparameters to "
                                 f"{np.dtype(dtype).name} ({why}): pass "
                                 f"hyperparam_dtype=jnp.float32 to keep them exact") from None
            return InjectStatefulHyperparamsState(
                count=_zero_count(), hyperparams=hparams, hyperparams_states=h_states,
                inner_state=inner.init(params))

        def update(grads, state, params=None, **extra_args):
            dtype = hp_dtype(params)
            hparams = {k: _convert_floats(v, dtype) for k, v in state.hyperparams.items()}
            hparams.update({k: _convert_floats(f(state.hyperparams_states[k].count), dtype)
                            for k, f in sched_hps.items()})
            h_states = {k: WrappedScheduleState(count=_safe_increment(s.count))
                        for k, s in state.hyperparams_states.items()}
            tx = with_extra_args_support(inner_factory(**other_hps, **hparams))
            grads, inner_state = tx.update(grads, state.inner_state, params, **extra_args)
            return grads, InjectStatefulHyperparamsState(
                count=_safe_increment(state.count), hyperparams=hparams,
                hyperparams_states=h_states, inner_state=inner_state)

        return GradientTransformation(init, update)

    return wrapped


inject_stateful_hyperparams = inject_hyperparams


class MultiSteps:
    """optax.MultiSteps: the class form of multi_steps (same state, same numbers).

    `every_k_schedule` must be an int here (optax also takes a schedule of the step).
    """

    def __init__(self, opt: GradientTransformation, every_k_schedule: int,
                 use_grad_mean: bool = True, should_skip_update_fn: Any = None,
                 accumulator_dtype: Any = None):
        if callable(every_k_schedule):
            raise NotImplementedError("MultiSteps: every_k_schedule must be an int in "
                                      "fnad.optim (a schedule of the step is not supported)")
        if should_skip_update_fn is not None:
            raise NotImplementedError("MultiSteps: should_skip_update_fn is not supported; "
                                      "wrap the optimizer in apply_if_finite instead")
        self._opt = opt
        self._every_k = every_k_schedule
        self._tx = multi_steps(opt, every_k_schedule, use_grad_mean=use_grad_mean,
                               accumulator_dtype=accumulator_dtype)

    @property
    def inner_opt(self) -> GradientTransformation:
        return self._opt

    def init(self, params: Any) -> MultiStepsState:
        return self._tx.init(params)

    def update(self, updates: Any, state: MultiStepsState, params: Any = None,
               **extra_args: Any) -> tuple[Any, MultiStepsState]:
        return self._tx.update(updates, state, params)

    def has_updated(self, state: MultiStepsState) -> Any:
        """True right after a step that applied the inner optimizer."""
        return jnp.logical_and(state.mini_step == 0, state.gradient_step > 0)

    def gradient_transformation(self) -> GradientTransformation:
        return GradientTransformation(self.init, self.update)
