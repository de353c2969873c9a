"""fnad.optim.losses against optax.losses: values (eager and under jit) and gradients
(of the summed loss, with respect to every float argument) on random float32 inputs, with
the optional arguments (axis, where, delta, alpha, ...) where optax has them; bad input
against clear errors. Skips when optax (the oracle) is not installed."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as jnp
from fnad import optim
from fnad.optim import losses

ox = pytest.importorskip("optax", reason="optax not installed: it is the oracle here")
jax = pytest.importorskip("jax")

RNG = np.random.default_rng(0)
B, K = 4, 5


def r(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def probs(*shape, axis=-1):
    x = np.exp(r(*shape))
    return (x / x.sum(axis=axis, keepdims=True)).astype(np.float32)


LOGITS = r(B, K)
LABELS_INT = RNG.integers(0, K, size=(B,)).astype(np.int32)
WHERE = np.array([[1, 1, 0, 1, 1], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0], [1, 0, 1, 1, 1]], bool)
LOGITS3 = r(2, 3, 4)
LABELS3 = RNG.integers(0, 12, size=(2,)).astype(np.int32)
BIN = (RNG.random((B, K)) > 0.5).astype(np.float32)
PM1 = np.where(RNG.random((B, K)) > 0.5, 1.0, -1.0).astype(np.float32)

T_, N_ = 7, 4
CTC_LOGITS = r(B, T_, K)
CTC_PAD = np.zeros((B, T_), np.float32)
CTC_PAD[1, 5:] = 1.0
CTC_PAD[2, 6:] = 1.0
CTC_LABELS = RNG.integers(1, K, size=(B, N_)).astype(np.int32)
CTC_LABELS[0, 2] = CTC_LABELS[0, 1]                   # a repeated label needs a blank between
CTC_LABELS[1] = [3, 1, 2, 4]       # every alignment feasible (labels + repeats <= frames): an
#                                    infeasible one costs ~ -log_epsilon, all f32 rounding
CTC_LABEL_PAD = np.zeros((B, N_), np.float32)
CTC_LABEL_PAD[2, 3:] = 1.0
CTC_LABEL_PAD[3, 1:] = 1.0

# name -> (loss name, positional args, keyword args, indices of args to differentiate)
CASES = {
    "squared_error": ("squared_error", (r(B, K), r(B, K)), {}, (0, 1)),
    "squared_error_no_targets": ("squared_error", (r(B, K),), {}, (0,)),
    "l2_loss": ("l2_loss", (r(B, K), r(B, K)), {}, (0, 1)),
    "huber_loss": ("huber_loss", (3 * r(B, K), r(B, K)), {}, (0, 1)),
    "huber_loss_delta": ("huber_loss", (3 * r(B, K), r(B, K)), dict(delta=0.5), (0, 1)),
    "log_cosh": ("log_cosh", (3 * r(B, K), r(B, K)), {}, (0, 1)),
    "log_cosh_large": ("log_cosh", (np.array([100.0, -200.0, 0.5], np.float32),), {}, (0,)),
    "softmax_cross_entropy": ("softmax_cross_entropy", (LOGITS, probs(B, K)), {}, (0, 1)),
    "softmax_cross_entropy_axis0": ("softmax_cross_entropy", (LOGITS, probs(B, K, axis=0)),
                                    dict(axis=0), (0, 1)),
    "softmax_cross_entropy_where": ("softmax_cross_entropy",
                                    (LOGITS, probs(B, K) * WHERE), dict(where=WHERE), (0, 1)),
    "softmax_ce_integer": ("softmax_cross_entropy_with_integer_labels", (LOGITS, LABELS_INT),
                           {}, (0,)),
    "softmax_ce_integer_axis0": ("softmax_cross_entropy_with_integer_labels",
                                 (LOGITS.T.copy(), LABELS_INT), dict(axis=0), (0,)),
    "softmax_ce_integer_where": ("softmax_cross_entropy_with_integer_labels",
                                 (LOGITS, np.array([0, 2, 3, 4], np.int32)),
                                 dict(where=WHERE), (0,)),
    "softmax_ce_integer_axes": ("softmax_cross_entropy_with_integer_labels",
                                (LOGITS3, LABELS3), dict(axis=(1, 2)), (0,)),
    "sigmoid_binary_cross_entropy": ("sigmoid_binary_cross_entropy", (3 * LOGITS, BIN), {},
                                     (0,)),
    "sigmoid_bce_soft": ("sigmoid_binary_cross_entropy", (LOGITS, probs(B, K)), {}, (0, 1)),
    "sigmoid_focal_loss": ("sigmoid_focal_loss", (LOGITS, BIN), {}, (0,)),
    "sigmoid_focal_loss_alpha": ("sigmoid_focal_loss", (LOGITS, BIN),
                                 dict(alpha=0.25, gamma=1.5), (0,)),
    "hinge_loss": ("hinge_loss", (r(B, K), PM1), {}, (0,)),
    "cosine_similarity": ("cosine_similarity", (r(B, K), r(B, K)), {}, (0, 1)),
    "cosine_similarity_eps_axis": ("cosine_similarity", (r(B, K), r(B, K)),
                                   dict(epsilon=0.5, axis=0), (0, 1)),
    "cosine_distance": ("cosine_distance", (r(B, K), r(B, K)), {}, (0, 1)),
    "cosine_distance_where": ("cosine_distance", (r(B, K), r(B, K)), dict(where=WHERE),
                              (0, 1)),
    "kl_divergence": ("kl_divergence", (np.log(probs(B, K)), probs(B, K)), {}, (0, 1)),
    "kl_divergence_zero_target": ("kl_divergence",
                                  (np.log(probs(B, K)), probs(B, K) * WHERE), {}, (0,)),
    "kl_divergence_where": ("kl_divergence", (np.log(probs(B, K)), probs(B, K)),
                            dict(where=WHERE), (0, 1)),
    "kl_divergence_with_log_targets": ("kl_divergence_with_log_targets",
                                       (np.log(probs(B, K)), np.log(probs(B, K))), {},
                                       (0, 1)),
    "convex_kl_divergence": ("convex_kl_divergence", (r(B, K), probs(B, K)), {}, (0, 1)),
    "generalized_kl_divergence": ("generalized_kl_divergence", (r(B, K), probs(B, K)),
                                  dict(axis=0), (0, 1)),
    "poly_loss_cross_entropy": ("poly_loss_cross_entropy", (LOGITS, probs(B, K)), {}, (0, 1)),
    "poly_loss_cross_entropy_eps": ("poly_loss_cross_entropy", (LOGITS, probs(B, K)),
                                    dict(epsilon=-0.5, axis=0), (0, 1)),
    "smooth_labels": ("smooth_labels", (np.eye(K, dtype=np.float32)[LABELS_INT], 0.1), {},
                      (0,)),
    "smooth_labels_where": ("smooth_labels", (np.eye(K, dtype=np.float32)[LABELS_INT], 0.2),
                            dict(where=WHERE), (0,)),
    "safe_softmax_cross_entropy": ("safe_softmax_cross_entropy", (LOGITS, probs(B, K)), {},
                                   (0, 1)),
    "safe_softmax_cross_entropy_neg_inf": (
        "safe_softmax_cross_entropy",
        (np.where(WHERE, LOGITS, -np.inf).astype(np.float32), probs(B, K) * WHERE), {}, (0,)),
    "ctc_loss": ("ctc_loss", (CTC_LOGITS, CTC_PAD, CTC_LABELS, CTC_LABEL_PAD), {}, (0,)),
    "ctc_loss_blank_id": ("ctc_loss", (CTC_LOGITS, CTC_PAD, CTC_LABELS % 4, CTC_LABEL_PAD),
                          dict(blank_id=4, log_epsilon=-1e4), (0,)),
    "perceptron_loss": ("perceptron_loss", (r(B, K), PM1), {}, (0,)),
    "multiclass_hinge_loss": ("multiclass_hinge_loss", (LOGITS, LABELS_INT), {}, (0,)),
}


def _close(got, want, where):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{where}: shape {got.shape} vs {want.shape}"
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=where)


@pytest.mark.parametrize("name", list(CASES))
def test_loss_matches_optax(name):
    fn_name, args, kw, diff = CASES[name]
    ours, theirs = getattr(losses, fn_name), getattr(ox.losses, fn_name)
    fargs = [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    jargs = [jax.numpy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    fkw = {k: jnp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    jkw = {k: jax.numpy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    want = theirs(*jargs, **jkw)
    _close(ours(*fargs, **fkw), want, f"{name} value")
    _close(traced(lambda *a: ours(*a, **fkw))(*fargs), want, f"{name} jit value")
    for i in diff:
        def fsum(x, i=i):
            return jnp.sum(ours(*fargs[:i], x, *fargs[i + 1:], **fkw))

        def jsum(x, i=i):
            return jax.numpy.sum(theirs(*jargs[:i], x, *jargs[i + 1:], **jkw))

        _close(fnad.grad(fsum)(fargs[i]), jax.grad(jsum)(jargs[i]), f"{name} grad arg {i}")


def test_ctc_forward_probs_match_optax():
    args = (CTC_LOGITS, CTC_PAD, CTC_LABELS, CTC_LABEL_PAD)
    got = losses.ctc_loss_with_forward_probs(*[jnp.asarray(a) for a in args])
    want = ox.losses.ctc_loss_with_forward_probs(*args)
    for g, w, what in zip(got, want, ["loss", "log alpha phi", "log alpha emit"]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-3,
                                   err_msg=what)            # atol: log_epsilon sums (-1e5)


def test_top_level_reexports_match_optax():
    """The losses optax exports at its top level are also fnad.optim's."""
    for name in ["l2_loss", "squared_error", "huber_loss", "log_cosh", "softmax_cross_entropy",
                 "softmax_cross_entropy_with_integer_labels", "sigmoid_binary_cross_entropy",
                 "sigmoid_focal_loss", "hinge_loss", "cosine_similarity", "cosine_distance",
                 "kl_divergence", "convex_kl_divergence", "smooth_labels",
                 "safe_softmax_cross_entropy", "generalized_kl_divergence", "ctc_loss",
                 "ctc_loss_with_forward_probs"]:
        assert hasattr(ox, name), name
        assert getattr(optim, name) is getattr(losses, name), name


def test_loss_errors():
    raises_with(lambda: losses.squared_error(jnp.ones(3, jnp.int32)), "squared_error",
                "floating", exc=TypeError)
    raises_with(lambda: losses.squared_error(jnp.ones(3), jnp.ones(4)), "same shape",
                exc=ValueError)
    raises_with(lambda: losses.softmax_cross_entropy_with_integer_labels(
        jnp.ones((2, 3)), jnp.zeros(2)), "labels", "integer", exc=TypeError)
    raises_with(lambda: losses.softmax_cross_entropy_with_integer_labels(
        jnp.ones((2, 3)), jnp.zeros(2, jnp.int32), axis=2), "axis 2", "out of bounds",
        exc=ValueError)
    raises_with(lambda: losses.kl_divergence(jnp.ones(3), jnp.ones(3, jnp.int32)),
                "targets", exc=TypeError)
    raises_with(lambda: losses.ctc_loss(jnp.ones((2, 5)), jnp.zeros((2, 5)),
                                        jnp.zeros((2, 3), jnp.int32), jnp.zeros((2, 3))),
                "ctc_loss", "[B, T, K]", exc=ValueError)
    raises_with(lambda: losses.ctc_loss(jnp.ones((2, 5, 4)), jnp.zeros((2, 4)),
                                        jnp.zeros((2, 3), jnp.int32), jnp.zeros((2, 3))),
                "logit_paddings", exc=ValueError)
