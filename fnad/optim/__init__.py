"""fnad.optim: Optax-style optimizers, transformations, schedules and losses.

An optimizer is a named pair of pure functions (`GradientTransformation`):

    state            = tx.init(params)
    updates, state'  = tx.update(grads, state, params)      # params: only if tx needs them
    params'          = apply_updates(params, updates)       # p' = p + u

The state is a pytree of fnad arrays with a fixed structure (step counters are int32
scalars), so a train step that threads it works under `fnad.jit`; schedules are evaluated
on the traced step count with fnad.numpy ops, never Python branches on traced values.
Names, signatures, state structures and update equations are optax 0.2.8's (code ports by
changing the import); the tests check each step for step against optax.

Optimizers (_alias.py): sgd (momentum, nesterov), adam, nadam, adamw, nadamw, adagrad,
adamax, adamaxw, amsgrad, adabelief, adadelta, adafactor, lion, lamb, lars, fromage,
novograd, noisy_sgd, radam, rmsprop (centered, momentum, nesterov), sm3, yogi, sign_sgd,
signum, polyak_sgd.

Transformations (_transforms.py, _layerwise.py, _constraints.py): trace, ema, scale_by_adam,
scale_by_amsgrad, scale_by_adamax, scale_by_belief, scale_by_yogi, scale_by_radam,
scale_by_lion, scale_by_rms, scale_by_stddev, scale_by_rss, scale_by_adadelta,
scale_by_trust_ratio, scale_by_param_block_norm, scale_by_param_block_rms,
scale_by_novograd, scale_by_factored_rms, scale_by_sm3, scale_by_sign, scale_by_polyak,
centralize, clip, clip_by_block_rms, clip_by_global_norm, zero_nans,
keep_params_nonnegative, add_decayed_weights, add_noise; with _base.py's scale,
scale_by_schedule, scale_by_learning_rate, identity, set_to_zero, stateless,
stateless_with_tree_map, chain, named_chain, apply_updates, global_norm.

Wrappers (_wrappers.py): masked (MaskedState, MaskedNode), multi_transform / partition,
apply_if_finite, inject_hyperparams (hyperparameters in the state, schedules included),
multi_steps (gradient accumulation, as optax.MultiSteps) and accumulate_gradients (a scan
over micro-batches; fnad's own).

Schedules (_schedules.py): constant, linear, polynomial, cosine_decay, exponential_decay,
piecewise_constant, piecewise_interpolate, linear_onecycle, cosine_onecycle, sgdr,
join_schedules, warmup_constant, warmup_cosine_decay, warmup_exponential_decay.

Losses: `fnad.optim.losses` (optax.losses' names; the ones optax exports at top level are
also here). Tree arithmetic: `fnad.optim.tree_utils` (optax.tree_utils' basics).

Written with fnad's public API only (fnad.numpy, fnad.lax, fnad.nn, fnad.random,
fnad.tree_util), as a user would. Must not be imported by fnad's core modules.
"""
from __future__ import annotations

# ruff: noqa: F401  (the names below are re-exported through the computed __all__)

from . import losses, tree_utils
from ._alias import *  # noqa: F403
from ._alias import __all__ as _alias_all
from ._base import (
    EmptyState, GradientTransformation, GradientTransformationExtraArgs, Schedule,
    ScalarOrSchedule, ScaleByScheduleState, apply_updates, chain, clip_by_global_norm,
    global_norm, identity, init_empty_state, named_chain, scale, scale_by_learning_rate,
    scale_by_schedule, set_to_zero, stateless, stateless_with_tree_map, with_extra_args_support,
)
from ._constraints import *  # noqa: F403
from ._constraints import __all__ as _constraints_all
from ._layerwise import *  # noqa: F403
from ._layerwise import __all__ as _layerwise_all
from ._schedules import *  # noqa: F403
from ._schedules import __all__ as _schedules_all
from ._transforms import *  # noqa: F403
from ._transforms import __all__ as _transforms_all
from ._wrappers import *  # noqa: F403
from ._wrappers import __all__ as _wrappers_all
from .losses import (
    convex_kl_divergence, cosine_distance, cosine_similarity, ctc_loss,
    ctc_loss_with_forward_probs, generalized_kl_divergence,
    hinge_loss, huber_loss, kl_divergence, l2_loss, log_cosh, safe_softmax_cross_entropy,
    sigmoid_binary_cross_entropy, sigmoid_focal_loss, smooth_labels, softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels, squared_error,
)

ScaleState = EmptyState

__all__ = sorted(set(
    _alias_all + _constraints_all + _layerwise_all + _schedules_all + _transforms_all
    + _wrappers_all + [
        "EmptyState", "GradientTransformation", "GradientTransformationExtraArgs", "Schedule",
        "ScalarOrSchedule", "ScaleByScheduleState", "ScaleState", "apply_updates", "chain",
        "clip_by_global_norm", "global_norm", "identity", "init_empty_state", "losses",
        "named_chain", "scale", "scale_by_learning_rate", "scale_by_schedule", "set_to_zero",
        "stateless", "stateless_with_tree_map", "tree_utils", "with_extra_args_support",
        "convex_kl_divergence", "cosine_distance", "cosine_similarity", "ctc_loss",
        "ctc_loss_with_forward_probs",
        "generalized_kl_divergence", "hinge_loss", "huber_loss", "kl_divergence", "l2_loss",
        "log_cosh", "safe_softmax_cross_entropy", "sigmoid_binary_cross_entropy",
        "sigmoid_focal_loss", "smooth_labels", "softmax_cross_entropy",
        "softmax_cross_entropy_with_integer_labels", "squared_error",
    ]))
