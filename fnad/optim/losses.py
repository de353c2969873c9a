"""fnad.optim.losses: optax.losses' elementwise and per-example losses.

Each returns the unreduced loss (per element or per example: take the mean yourself), with
optax's names, arguments and formulas, so values and gradients agree with optax. Uses
fnad.numpy and fnad.nn only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax, nn

__all__ = [
    "convex_kl_divergence", "cosine_distance", "cosine_similarity", "ctc_loss",
    "ctc_loss_with_forward_probs", "generalized_kl_divergence",
    "hinge_loss", "huber_loss", "kl_divergence", "kl_divergence_with_log_targets", "l2_loss",
    "log_cosh", "multiclass_hinge_loss", "perceptron_loss", "poly_loss_cross_entropy",
    "safe_softmax_cross_entropy", "sigmoid_binary_cross_entropy", "sigmoid_focal_loss",
    "smooth_labels", "softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
    "squared_error",
]

Axis = int | tuple[int, ...] | None


def _check_subdtype(where: str, name: str, x: Any, kind: type) -> None:
    dtype = np.dtype(jnp.asarray(x).dtype) if not isinstance(x, (int, float)) else \
        np.dtype(type(x))
    if not jnp.issubdtype(dtype, kind):                 # jnp's: bfloat16 is a floating dtype
        raise TypeError(f"{where}: {name} must have a {kind.__name__} dtype, got {dtype}")


def _check_same_shape(where: str, a: Any, b: Any) -> None:
    if jnp.shape(a) != jnp.shape(b):
        raise ValueError(f"{where}: predictions and targets must have the same shape, got "
                         f"{jnp.shape(a)} and {jnp.shape(b)}")


# ---- regression -------------------------------------------------------------------------
def squared_error(predictions: Any, targets: Any = None) -> Any:
    """(y - t)² elementwise (y² without targets)."""
    _check_subdtype("squared_error", "predictions", predictions, np.floating)
    predictions = jnp.asarray(predictions)
    if targets is not None:
        _check_same_shape("squared_error", predictions, targets)
    errors = predictions - targets if targets is not None else predictions
    return errors ** 2


def l2_loss(predictions: Any, targets: Any = None) -> Any:
    """½ (y - t)² elementwise."""
    return 0.5 * squared_error(jnp.asarray(predictions), targets)


def huber_loss(predictions: Any, targets: Any = None, *, delta: float = 1.0) -> Any:
    """½ e² for |e| <= δ, δ (|e| - ½ δ) beyond; e = y - t."""
    _check_subdtype("huber_loss", "predictions", predictions, np.floating)
    errors = (predictions - targets) if targets is not None else jnp.asarray(predictions)
    abs_errors = jnp.abs(errors)
    quadratic = jnp.minimum(abs_errors, delta)
    linear = abs_errors - quadratic
    return 0.5 * quadratic ** 2 + delta * linear


def log_cosh(predictions: Any, targets: Any = None) -> Any:
    """log cosh(y - t), computed as logaddexp(e, -e) - log 2 (no overflow)."""
    _check_subdtype("log_cosh", "predictions", predictions, np.floating)
    errors = (predictions - targets) if targets is not None else jnp.asarray(predictions)
    return jnp.logaddexp(errors, -errors) - jnp.log(2.0).astype(errors.dtype)


def cosine_similarity(predictions: Any, targets: Any, *, epsilon: float = 0.0,
                      axis: Axis = -1, where: Any = None) -> Any:
    """⟨y, t⟩ / (‖y‖ ‖t‖) along axis, each squared norm floored at epsilon."""
    _check_subdtype("cosine_similarity", "predictions", predictions, np.floating)
    _check_subdtype("cosine_similarity", "targets", targets, np.floating)
    a, b = jnp.asarray(predictions), jnp.asarray(targets)
    a_norm = jnp.sqrt(jnp.clip(jnp.sum(jnp.square(a), axis=axis, where=where, keepdims=True),
                               epsilon))
    b_norm = jnp.sqrt(jnp.clip(jnp.sum(jnp.square(b), axis=axis, where=where, keepdims=True),
                               epsilon))
    return jnp.sum((a / a_norm) * (b / b_norm), axis=axis, where=where)


def cosine_distance(predictions: Any, targets: Any, *, epsilon: float = 0.0,
                    axis: Axis = -1, where: Any = None) -> Any:
    """1 - cosine_similarity."""
    return 1.0 - cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis,
                                   where=where)


# ---- classification ---------------------------------------------------------------------
def sigmoid_binary_cross_entropy(logits: Any, labels: Any) -> Any:
    """-t log σ(x) - (1 - t) log σ(-x) elementwise (labels may be soft)."""
    _check_subdtype("sigmoid_binary_cross_entropy", "logits", logits, np.floating)
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels).astype(logits.dtype)
    return -labels * nn.log_sigmoid(logits) - (1.0 - labels) * nn.log_sigmoid(-logits)


def sigmoid_focal_loss(logits: Any, labels: Any, *, alpha: float | None = None,
                       gamma: float = 2.0) -> Any:
    """Focal loss (Lin et al. 2017): BCE · (1 - p_t)^γ, times α_t = α t + (1 - α)(1 - t)
    when alpha is given; (1 - p_t) is computed in log space."""
    _check_subdtype("sigmoid_focal_loss", "logits", logits, np.floating)
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels).astype(logits.dtype)
    ce = sigmoid_binary_cross_entropy(logits, labels)
    log_p, log_q = nn.log_sigmoid(logits), nn.log_sigmoid(-logits)
    log_one_minus_p_t = nn.logsumexp(jnp.stack([log_p, log_q], axis=-1), axis=-1,
                                     b=jnp.stack([1 - labels, labels], axis=-1))
    loss = ce * jnp.exp(gamma * log_one_minus_p_t)
    if alpha is None:
        return loss
    return (alpha * labels + (1.0 - alpha) * (1.0 - labels)) * loss


def hinge_loss(predictor_outputs: Any, targets: Any) -> Any:
    """max(0, 1 - y t), targets in {-1, 1}."""
    return jnp.maximum(0, 1 - jnp.asarray(predictor_outputs) * targets)


def perceptron_loss(predictor_outputs: Any, targets: Any) -> Any:
    """max(0, -y t), targets in {-1, 1}."""
    _check_same_shape("perceptron_loss", predictor_outputs, targets)
    return jnp.maximum(0, -jnp.asarray(predictor_outputs) * targets)


def multiclass_hinge_loss(scores: Any, labels: Any) -> Any:
    """max_k (s_k + 1 - [k = y]) - s_y, per example; scores [..., K], labels [...] ints."""
    scores = jnp.asarray(scores)
    one_hot = nn.one_hot(labels, scores.shape[-1])                 # [..., K]
    return jnp.max(scores + 1.0 - one_hot, axis=-1) - jnp.sum(scores * one_hot, axis=-1)


def softmax_cross_entropy(logits: Any, labels: Any, axis: Axis = -1,
                          where: Any = None) -> Any:
    """-Σ_k t_k log softmax(x)_k along axis; labels are probabilities shaped like logits.
    `where` (like logits, or without the class axis) restricts the classes considered."""
    _check_subdtype("softmax_cross_entropy", "logits", logits, np.floating)
    logits = jnp.asarray(logits)
    if where is not None and jnp.ndim(where) != logits.ndim:
        where = jnp.expand_dims(where, axis)
    log_probs = nn.log_softmax(logits, axis, where)
    return -jnp.sum(labels * log_probs, axis=axis, where=where)


def _canonical_axis(where: str, axis: int, ndim: int) -> int:
    if -ndim <= axis < ndim:
        return axis % ndim
    raise ValueError(f"{where}: axis {axis} is out of bounds for logits of rank {ndim}")


def softmax_cross_entropy_with_integer_labels(logits: Any, labels: Any,
                                              axis: int | tuple[int, ...] = -1,
                                              where: Any = None) -> Any:
    """logsumexp(x) - x_y along axis (several axes are flattened into one class axis);
    labels are integer class indices shaped like logits without that axis. Examples whose
    `where` is all False give 0."""
    name = "softmax_cross_entropy_with_integer_labels"
    _check_subdtype(name, "logits", logits, np.floating)
    _check_subdtype(name, "labels", labels, np.integer)
    logits = jnp.asarray(logits)
    if where is not None and jnp.ndim(where) != logits.ndim:
        where = jnp.expand_dims(where, axis)
    if isinstance(axis, int):
        axis = _canonical_axis(name, axis, logits.ndim)
    elif isinstance(axis, tuple):
        logit_axis = tuple(_canonical_axis(name, a, logits.ndim) for a in axis)
        batch_axis = tuple(a for a in range(logits.ndim) if a not in logit_axis)
        axis = len(batch_axis)
        logits = jnp.transpose(logits, batch_axis + logit_axis)
        logits = logits.reshape(logits.shape[:axis] + (-1,))
        if where is not None:
            where = jnp.transpose(where, batch_axis + logit_axis)
            where = where.reshape(where.shape[:axis] + (-1,))
    else:
        raise ValueError(f"{name}: axis must be an int or a tuple of ints, got "
                         f"{type(axis).__name__}")
    label_logits = jnp.take(jnp.take_along_axis(logits, jnp.expand_dims(labels, axis),
                                                axis=axis), 0, axis=axis)
    out = nn.logsumexp(logits, axis=axis, where=where) - label_logits
    if where is not None:
        out = jnp.where(jnp.any(where, axis), out, 0.0)
    return out


@fnad.custom_jvp
def _weighted_logsoftmax(x, weights):
    logsoftmax_x = nn.log_softmax(x, axis=-1)
    return jnp.where(weights != 0.0, weights * logsoftmax_x, jnp.zeros_like(logsoftmax_x))


@_weighted_logsoftmax.defjvp
def _weighted_logsoftmax_jvp(primals, tangents):
    # d(w · log softmax x) = w · (dx - ⟨dx, softmax x⟩) + dw · log softmax x, where the
    # value is 0 where w = 0 (so a -inf logit with zero weight gives 0, not NaN)
    (x, weights), (x_dot, weights_dot) = primals, tangents
    logsoftmax_x = nn.log_softmax(x, axis=-1)
    result = jnp.where(weights != 0.0, weights * logsoftmax_x, jnp.zeros_like(logsoftmax_x))
    out = (weights * x_dot
           - weights * jnp.sum(x_dot * nn.softmax(x, axis=-1), axis=-1, keepdims=True)
           + weights_dot * logsoftmax_x)
    return result, out


def safe_softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """softmax_cross_entropy over the last axis that gives 0 (not NaN) for classes whose
    label is 0 and logit -inf."""
    _check_subdtype("safe_softmax_cross_entropy", "logits", logits, np.floating)
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels).astype(logits.dtype)
    return -jnp.sum(_weighted_logsoftmax(logits, labels), axis=-1)


def poly_loss_cross_entropy(logits: Any, labels: Any, *, epsilon: float = 2.0,
                            axis: Axis = -1, where: Any = None) -> Any:
    """Poly-1 loss (Leng et al. 2022): CE + ε · Σ_k t_k (1 - p_k)."""
    _check_subdtype("poly_loss_cross_entropy", "logits", logits, np.floating)
    _check_subdtype("poly_loss_cross_entropy", "labels", labels, np.floating)
    p = nn.softmax(logits, axis=axis, where=where)
    one_minus_pt = jnp.sum(labels * (1 - p), axis=axis, where=where)
    ce = softmax_cross_entropy(logits, labels, axis=axis, where=where)
    return ce + epsilon * one_minus_pt


def kl_divergence(log_predictions: Any, targets: Any, axis: Axis = -1,
                  where: Any = None) -> Any:
    """KL(t ‖ p) = Σ t (log t - log p) along axis (0 log 0 = 0)."""
    _check_subdtype("kl_divergence", "log_predictions", log_predictions, np.floating)
    _check_subdtype("kl_divergence", "targets", targets, np.floating)
    targets = jnp.asarray(targets)
    loss = targets * (jnp.where(targets == 0, 0, jnp.log(targets)) - log_predictions)
    return jnp.sum(loss, axis=axis, where=where)


def kl_divergence_with_log_targets(log_predictions: Any, log_targets: Any, axis: Axis = -1,
                                   where: Any = None) -> Any:
    """KL(t ‖ p) = Σ exp(log t) (log t - log p) along axis."""
    name = "kl_divergence_with_log_targets"
    _check_subdtype(name, "log_predictions", log_predictions, np.floating)
    _check_subdtype(name, "log_targets", log_targets, np.floating)
    loss = jnp.exp(log_targets) * (log_targets - log_predictions)
    return jnp.sum(loss, axis=axis, where=where)


def generalized_kl_divergence(log_predictions: Any, targets: Any, axis: Axis = -1,
                              where: Any = None) -> Any:
    """KL(t ‖ p) + Σ (p - t): convex in p, for unnormalized measures."""
    x = kl_divergence(log_predictions, targets, axis=axis, where=where)
    y = jnp.sum(jnp.exp(log_predictions) - targets, axis=axis, where=where)
    return x + y


def convex_kl_divergence(log_predictions: Any, targets: Any, axis: Axis = -1,
                         where: Any = None) -> Any:
    """The old name of generalized_kl_divergence (optax deprecates it)."""
    return generalized_kl_divergence(log_predictions, targets, axis=axis, where=where)


def smooth_labels(labels: Any, alpha: float, *, axis: Axis = -1, where: Any = None) -> Any:
    """(1 - α) t + α / K, K the number of classes along axis (counted by `where`)."""
    _check_subdtype("smooth_labels", "labels", labels, np.floating)
    labels = jnp.asarray(labels)
    if where is None:
        num_categories = (labels.shape[axis] if isinstance(axis, int) else
                          int(np.prod([labels.shape[a] for a in
                                       (range(labels.ndim) if axis is None else axis)])))
    else:
        num_categories = jnp.sum(where, axis, keepdims=True)
    return (1.0 - alpha) * labels + alpha / num_categories


# ---- CTC --------------------------------------------------------------------------------
def ctc_loss_with_forward_probs(logits: Any, logit_paddings: Any, labels: Any,
                                label_paddings: Any, *, blank_id: int = 0,
                                log_epsilon: float = -1e5) -> tuple[Any, Any, Any]:
    """Connectionist temporal classification (Graves et al. 2006), optax's forward pass.

    logits [B, T, K], logit_paddings [B, T] (1 = padding), labels [B, N] ints,
    label_paddings [B, N]. The forward variables over the label lattice, in log space,
    with log_epsilon standing for log 0 (a lax.scan over T):

        α_φ[n]  : the first n labels emitted, now in a blank       [T, B, N+1]
        α_e[n]  : the first n+1 labels emitted, now on label n       [T, B, N]

    Returns (per-sequence loss -log p(labels | logits) [B], α_φ, α_e).
    """
    where = "ctc_loss"
    logits = jnp.asarray(logits)
    labels = jnp.asarray(labels)
    if logits.ndim != 3 or labels.ndim != 2:
        raise ValueError(f"{where}: logits must be [B, T, K] and labels [B, N], got shapes "
                         f"{logits.shape} and {labels.shape}")
    if jnp.shape(label_paddings) != labels.shape:
        raise ValueError(f"{where}: label_paddings must be shaped like labels {labels.shape}, "
                         f"got {jnp.shape(label_paddings)}")
    if jnp.shape(logit_paddings) != logits.shape[:2]:
        raise ValueError(f"{where}: logit_paddings must be [B, T] = {logits.shape[:2]}, got "
                         f"{jnp.shape(logit_paddings)}")
    B, T, K = logits.shape
    if labels.shape[0] != B:
        raise ValueError(f"{where}: expected labels to have batch size {B}, got "
                         f"{labels.shape[0]}")
    N = labels.shape[1]
    logprobs = nn.log_softmax(logits)                                        # [B, T, K]
    labellens = N - jnp.sum(label_paddings, axis=1).astype(jnp.int32)         # [B]
    repeat = (labels[:, :-1] == labels[:, 1:]).astype(jnp.float32)           # [B, N-1]
    repeat = jnp.pad(repeat, ((0, 0), (0, 1)))                               # [B, N]
    logprobs_phi = jnp.transpose(logprobs[:, :, blank_id:blank_id + 1], (1, 0, 2))  # [T,B,1]
    one_hot = nn.one_hot(labels, K)                                          # [B, N, K]
    logprobs_emit = jnp.einsum("btk,bnk->btn", logprobs, one_hot)            # [B, T, N]
    logprobs_emit = jnp.transpose(logprobs_emit, (1, 0, 2))                  # [T, B, N]
    phi_init = jnp.concatenate([jnp.zeros((B, 1)), jnp.ones((B, N)) * log_epsilon],
                               axis=1)                                       # [B, N+1]
    emit_init = jnp.ones((B, N)) * log_epsilon                               # [B, N]

    def update_phi_score(phi, added_score):
        # phi[:, 1:] ⊕= added_score  (log-space addition)
        return jnp.concatenate([phi[:, :1], jnp.logaddexp(phi[:, 1:], added_score)], axis=-1)

    def loop_body(prev, x):
        prev_phi, prev_emit = prev
        prev_phi_orig = prev_phi
        # emit -> blank, except before a repeated label
        prev_phi = update_phi_score(prev_phi, prev_emit + log_epsilon * repeat)
        logprob_emit, logprob_phi, pad = x
        # blank -> emit and emit self-loop
        next_emit = jnp.logaddexp(prev_phi[:, :-1] + logprob_emit, prev_emit + logprob_emit)
        next_phi = prev_phi + logprob_phi                                    # blank self-loop
        # emit -> blank by a blank, only before a repeated label
        next_phi = update_phi_score(next_phi,
                                    prev_emit + logprob_phi + log_epsilon * (1.0 - repeat))
        pad = pad.reshape((B, 1))
        next_emit = pad * prev_emit + (1.0 - pad) * next_emit
        next_phi = pad * prev_phi_orig + (1.0 - pad) * next_phi
        return (next_phi, next_emit), (next_phi, next_emit)

    xs = (logprobs_emit, logprobs_phi, jnp.transpose(jnp.asarray(logit_paddings), (1, 0)))
    _, (logalpha_phi, logalpha_emit) = lax.scan(loop_body, (phi_init, emit_init), xs)
    phi_last = update_phi_score(logalpha_phi[-1], logalpha_emit[-1])        # [B, N+1]
    logalpha_phi = jnp.concatenate([logalpha_phi[:-1], phi_last[None]], axis=0)
    per_seq_loss = -jnp.einsum("bn,bn->b", phi_last, nn.one_hot(labellens, N + 1))  # [B]
    return per_seq_loss, logalpha_phi, logalpha_emit


def ctc_loss(logits: Any, logit_paddings: Any, labels: Any, label_paddings: Any, *,
             blank_id: int = 0, log_epsilon: float = -1e5) -> Any:
    """CTC loss -log p(labels | logits) per sequence [B] (see ctc_loss_with_forward_probs)."""
    return ctc_loss_with_forward_probs(logits, logit_paddings, labels, label_paddings,
                                       blank_id=blank_id, log_epsilon=log_epsilon)[0]
