"""fnad.optim against optax, step for step: optimizers, transformations and wrappers.

Each case runs STEPS steps on a pytree of float32 params with mixed shapes (nested dicts
and lists, a scalar), the fnad update under jit on TEST_BACKEND, the optax one eagerly,
and checks after every step that the params agree, and at the end that the two states
have the same key paths (NamedTuple fields, dict keys, list indices: the same structure)
and the same values. Skips when optax (the oracle) is not installed.
"""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as jnp
from fnad import optim, tree_util

ox = pytest.importorskip("optax", reason="optax not installed: it is the oracle here")
jax = pytest.importorskip("jax")

STEPS = 8
TOL = dict(rtol=3e-5, atol=3e-6)


def make_tree(rng, scalar=True):
    """Nested dicts and lists of float32 arrays of ranks 0-3."""
    def r(*shape):
        return rng.normal(size=shape).astype(np.float32)
    tree = {"dense": {"w": r(3, 4), "b": r(4)}, "layers": [{"scale": r(4)}, {"w": r(2, 3, 2)}]}
    if scalar:
        tree["s"] = r()
    return tree


def _f(tree):
    return tree_util.tree_map(jnp.asarray, tree)


def _j(tree):
    return jax.tree.map(jax.numpy.asarray, tree)


def _np_leaf(x):
    if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


def compare_states(state, ostate, where, tol=TOL):
    """Same key paths (structure) and, leaf for leaf, the same shapes and values."""
    fl = tree_util.tree_leaves_with_path(state)
    jl = jax.tree_util.tree_leaves_with_path(ostate)
    fpaths = [tree_util.keystr(k) for k, _ in fl]
    jpaths = [jax.tree_util.keystr(k) for k, _ in jl]
    assert fpaths == jpaths, f"{where}: state structure differs:\n{fpaths}\n{jpaths}"
    for path, (_, a), (_, b) in zip(fpaths, fl, jl):
        a, b = np.asarray(a), _np_leaf(b)
        assert a.shape == b.shape, f"{where}: state {path} shape {a.shape} vs {b.shape}"
        assert a.dtype == b.dtype, f"{where}: state {path} dtype {a.dtype} vs {b.dtype}"
        np.testing.assert_allclose(a, b, err_msg=f"{where}: state {path}", **tol)


def run_both(tx, otx, *, steps=STEPS, scalar=True, grads=None, extra=None, tol=TOL,
             where="", jit=True):
    """Run fnad's tx (jitted) and optax's otx side by side; compare params and states."""
    rng = np.random.default_rng(0)
    p0 = make_tree(rng, scalar)
    grads = grads or [make_tree(rng, scalar) for _ in range(steps)]
    p, op = _f(p0), _j(p0)
    s, os_ = tx.init(p), otx.init(op)
    compare_states(s, os_, f"{where} init", tol)
    step = traced(tx.update) if jit else tx.update
    for i, g in enumerate(grads):
        kw = extra(i) if extra else {}
        u, s = step(_f(g), s, p, **kw)
        p = optim.apply_updates(p, u)
        ou, os_ = otx.update(_j(g), os_, op, **kw)
        op = ox.apply_updates(op, ou)
        for path, a in tree_util.tree_leaves_with_path(p):
            b = op
            for k in path:
                b = b[getattr(k, "key", getattr(k, "idx", None))]
            np.testing.assert_allclose(np.asarray(a), np.asarray(b),
                                       err_msg=f"{where} step {i} {tree_util.keystr(path)}",
                                       **tol)
            assert np.asarray(a).dtype == np.float32
    compare_states(s, os_, f"{where} after {len(grads)} steps", tol)
    return p, s


# ---- optimizers -------------------------------------------------------------------------
def _warmup_cos(m):
    return m.warmup_cosine_decay_schedule(0.0, 3e-2, 3, 10, 3e-3)


def _expo(m):
    return m.exponential_decay(2e-2, 2, 0.7, transition_begin=1, staircase=True,
                               end_value=5e-3)


def _onecycle(m):
    return m.cosine_onecycle_schedule(10, 5e-2)


def _piecewise(m):
    return m.piecewise_constant_schedule(0.1, {2: 0.5, 5: 0.1})


# name -> (a function of the module (optim or optax) building the optimizer, keywords
# for run_both)
OPTIMIZERS = {
    "sgd_plain": (lambda m: m.sgd(0.1), {}),                   # momentum None: no trace
    "sgd_momentum_zero": (lambda m: m.sgd(0.1, momentum=0.0), {}),   # a TraceState
    "sgd_nesterov": (lambda m: m.sgd(0.05, momentum=0.9, nesterov=True), {}),
    "sgd_momentum_sched": (lambda m: m.sgd(_piecewise(m), momentum=0.5), {}),
    "rmsprop": (lambda m: m.rmsprop(1e-2), {}),
    "rmsprop_centered_momentum_nesterov": (
        lambda m: m.rmsprop(1e-2, centered=True, momentum=0.9, nesterov=True), {}),
    "rmsprop_bias_correction": (
        lambda m: m.rmsprop(_expo(m), bias_correction=True, eps_in_sqrt=False,
                            initial_scale=0.1), {}),
    "adagrad": (lambda m: m.adagrad(0.1), {}),
    "adagrad_sched": (lambda m: m.adagrad(_onecycle(m), initial_accumulator_value=0.5), {}),
    "adamax": (lambda m: m.adamax(1e-2), {}),
    "adamaxw": (lambda m: m.adamaxw(_warmup_cos(m), weight_decay=0.1), {}),
    "nadam": (lambda m: m.nadam(1e-2), {}),
    "nadamw": (lambda m: m.nadamw(_warmup_cos(m), weight_decay=0.1), {}),
    # bf16 first moment: one bf16 rounding apart after a few steps (XLA may fuse b1 · m)
    "adam_mu_dtype": (lambda m: m.adam(1e-2, mu_dtype=jnp.bfloat16 if m is optim
                                       else jax.numpy.bfloat16),
                      dict(tol=dict(rtol=4e-2, atol=4e-3))),
    "radam": (lambda m: m.radam(1e-2), {}),
    "radam_nesterov_threshold": (lambda m: m.radam(_expo(m), threshold=1.0, nesterov=True), {}),
    "adabelief": (lambda m: m.adabelief(1e-2), {}),
    "adabelief_nesterov": (lambda m: m.adabelief(_warmup_cos(m), nesterov=True), {}),
    "lion": (lambda m: m.lion(1e-3), {}),
    "lion_sched_mask": (lambda m: m.lion(_warmup_cos(m), weight_decay=0.5,
                                         mask=lambda p: tree_util.tree_map(
                                             lambda x: x.ndim >= 2, p)), {}),
    "lamb": (lambda m: m.lamb(1e-2, weight_decay=0.1), {}),
    "lars": (lambda m: m.lars(0.1, weight_decay=0.1), {}),
    "lars_masks": (lambda m: m.lars(
        _piecewise(m), weight_decay=0.1, nesterov=True,
        weight_decay_mask={"dense": True, "layers": False, "s": False},
        trust_ratio_mask={"dense": {"w": True, "b": False}, "layers": True, "s": False}), {}),
    "adafactor": (lambda m: m.adafactor(1e-2), {}),
    "adafactor_factored": (lambda m: m.adafactor(
        _warmup_cos(m), min_dim_size_to_factor=2, momentum=0.9, weight_decay_rate=0.01,
        decay_offset=1), {}),
    "adafactor_no_lr": (lambda m: m.adafactor(min_dim_size_to_factor=3,
                                              clipping_threshold=None,
                                              multiply_by_parameter_scale=False), {}),
    "novograd": (lambda m: m.novograd(1e-2, weight_decay=0.1), {}),
    "yogi": (lambda m: m.yogi(1e-2), {}),
    "adadelta": (lambda m: m.adadelta(1.0, weight_decay=0.1), {}),
    "adadelta_no_lr": (lambda m: m.adadelta(), {}),
    "amsgrad": (lambda m: m.amsgrad(1e-2), {}),
    "amsgrad_no_bias_correction": (lambda m: m.amsgrad(_expo(m), bias_correction_mu=False,
                                                       bias_correction_nu=False), {}),
    "fromage": (lambda m: m.fromage(1e-2), {}),
    "fromage_sched": (lambda m: m.fromage(m.linear_schedule(0.1, 0.01, 4)), {}),
    "sm3": (lambda m: m.sm3(1e-2), dict(scalar=False)),
    "sign_sgd": (lambda m: m.sign_sgd(1e-2), {}),
    "signum": (lambda m: m.signum(_warmup_cos(m)), {}),
    "noisy_sgd": (lambda m: m.noisy_sgd(1e-2, key=3), {}),
    "noisy_sgd_sched": (lambda m: m.noisy_sgd(_onecycle(m), eta=0.1, gamma=0.3, key=11), {}),
    "polyak_sgd": (lambda m: m.polyak_sgd(max_learning_rate=0.5),
                   dict(extra=lambda i: {"value": 1.0 + 0.5 * i})),
    "polyak_sgd_plus": (lambda m: m.polyak_sgd(scaling=0.3, f_min=3.0, variant="sps+"),
                        dict(extra=lambda i: {"value": 1.0 + 0.5 * i})),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_matches_optax(name):
    make, kw = OPTIMIZERS[name]
    run_both(make(optim), make(ox), where=name, **kw)


def test_noisy_sgd_noise_is_optax_noise():
    """noisy_sgd on zero gradients moves params by -η σ_t ε exactly as optax (same key
    gives the same threefry draws), and the noise has the annealed variance η / t^γ."""
    zeros = tree_util.tree_map(np.zeros_like, make_tree(np.random.default_rng(0)))
    _, s = run_both(optim.noisy_sgd(1.0, eta=0.5, gamma=0.5, key=7),
                    ox.noisy_sgd(1.0, eta=0.5, gamma=0.5, key=7), grads=[zeros] * 3,
                    where="noisy_sgd zero grads")
    big = {"w": jnp.zeros((400, 50))}
    tx = optim.noisy_sgd(1.0, eta=0.5, gamma=0.5, key=1)
    st = tx.init(big)
    for t in (1, 2):
        u, st = tx.update(tree_util.tree_map(jnp.zeros_like, big), st)
        noise = np.asarray(u["w"])
        assert abs(noise.mean()) < 0.02
        np.testing.assert_allclose(noise.std(), np.sqrt(0.5 / t ** 0.5), rtol=0.03)


# ---- transformations --------------------------------------------------------------------
TRANSFORMS = {
    "scale_by_rms": lambda m: m.scale_by_rms(),
    # (initial_scale > 0: with bias correction and v_0 = 0 the first step's variance
    # v̂ - m̂² = g² - g² is pure rounding)
    "scale_by_stddev": lambda m: m.scale_by_stddev(decay=0.8, initial_scale=0.5,
                                                   bias_correction=True),
    "scale_by_stddev_plain": lambda m: m.scale_by_stddev(eps_in_sqrt=False),
    "scale_by_belief": lambda m: m.scale_by_belief(),
    "scale_by_lion": lambda m: m.scale_by_lion(b1=0.8),
    "scale_by_trust_ratio": lambda m: m.scale_by_trust_ratio(min_norm=0.5,
                                                             trust_coefficient=0.1, eps=1e-3),
    "scale_by_factored_rms": lambda m: m.scale_by_factored_rms(min_dim_size_to_factor=2),
    "scale_by_param_block_norm": lambda m: m.scale_by_param_block_norm(),
    "scale_by_param_block_rms": lambda m: m.scale_by_param_block_rms(min_scale=0.9),
    "scale_by_radam": lambda m: m.scale_by_radam(threshold=2.0),
    "scale_by_amsgrad": lambda m: m.scale_by_amsgrad(),
    "scale_by_yogi": lambda m: m.scale_by_yogi(initial_accumulator_value=0.1),
    "scale_by_novograd": lambda m: m.scale_by_novograd(),
    "scale_by_adam_nesterov": lambda m: m.scale_by_adam(nesterov=True),
    "scale_by_adamax": lambda m: m.scale_by_adamax(),
    "scale_by_rss": lambda m: m.scale_by_rss(),
    "scale_by_adadelta": lambda m: m.scale_by_adadelta(),
    "scale_by_sign": lambda m: m.scale_by_sign(),
    "clip": lambda m: m.clip(0.7),
    "clip_by_block_rms": lambda m: m.clip_by_block_rms(0.5),
    "clip_by_global_norm": lambda m: m.clip_by_global_norm(1.5),
    "zero_nans": lambda m: m.zero_nans(),
    "keep_params_nonnegative": lambda m: m.chain(m.scale(-2.0), m.keep_params_nonnegative()),
    "centralize": lambda m: m.centralize(),
    "add_noise": lambda m: m.add_noise(0.1, 0.55, key=5),
    "ema": lambda m: m.ema(0.9),
    "ema_no_debias": lambda m: m.ema(0.7, debias=False),
    "trace_nesterov": lambda m: m.trace(0.8, nesterov=True),
    "add_decayed_weights_sched": lambda m: m.add_decayed_weights(m.linear_schedule(0.1, 0.0, 5)),
    "add_decayed_weights_mask": lambda m: m.add_decayed_weights(
        0.3, mask={"dense": {"w": True, "b": False}, "layers": True, "s": False}),
    "set_to_zero": lambda m: m.set_to_zero(),
    "stateless": lambda m: m.stateless(
        lambda g, p: jax.tree.map(lambda a, b: a * b, g, p) if m is ox
        else tree_util.tree_map(lambda a, b: a * b, g, p)),
    "stateless_with_tree_map": lambda m: m.stateless_with_tree_map(lambda g, p: g - 0.5 * p),
    "masked_trace": lambda m: m.masked(m.trace(0.9), {"dense": True, "layers": [False, True],
                                                      "s": False}),
    "masked_callable_adam": lambda m: m.masked(
        m.adam(1e-2), lambda p: jax.tree.map(lambda x: x.ndim == 1, p) if m is ox
        else tree_util.tree_map(lambda x: x.ndim == 1, p)),
    "multi_transform": lambda m: m.multi_transform(
        {"a": m.adam(1e-2), "s": m.sgd(0.1, momentum=0.9), "f": m.set_to_zero()},
        {"dense": {"w": "a", "b": "s"}, "layers": "a", "s": "f"}),
    "multi_transform_callable": lambda m: m.multi_transform(
        {"big": m.lion(1e-3), "small": m.adagrad(0.1)},
        lambda p: (jax.tree.map if m is ox else tree_util.tree_map)(
            lambda x: "big" if x.ndim >= 2 else "small", p)),
    "apply_if_finite": lambda m: m.apply_if_finite(m.adam(1e-2), 2),
    "inject_hyperparams_adam": lambda m: m.inject_hyperparams(m.adam)(
        learning_rate=_warmup_cos(m), b1=0.8),
    "inject_hyperparams_rmsprop_static": lambda m: m.inject_hyperparams(
        m.rmsprop, static_args="momentum")(learning_rate=1e-2, momentum=0.9, centered=True),
    "inject_hyperparams_adamw_wd_sched": lambda m: m.inject_hyperparams(m.adamw)(
        1e-2, weight_decay=m.linear_schedule(0.1, 0.0, 6)),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transformation_matches_optax(name):
    make = TRANSFORMS[name]
    run_both(make(optim), make(ox), where=name)


def _with_bad_values(grads, steps):
    """Copies of grads with a NaN (or inf) planted at the given steps."""
    out = [tree_util.tree_map(np.array, g) for g in grads]
    for i in steps:
        out[i]["dense"]["w"][1, 2] = np.nan if i % 2 else np.inf
    return out


def test_apply_if_finite_skips_nonfinite_steps():
    rng = np.random.default_rng(3)
    grads = _with_bad_values([make_tree(rng) for _ in range(9)], [1, 4, 5, 6])
    # steps 4, 5, 6: three bad steps in a row, all skipped with max_consecutive_errors=3
    p, s = run_both(optim.apply_if_finite(optim.sgd(0.1, momentum=0.5), 3),
                    ox.apply_if_finite(ox.sgd(0.1, momentum=0.5), 3), grads=grads,
                    where="apply_if_finite")
    assert int(s.total_notfinite) == 4 and bool(s.last_finite)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in tree_util.tree_leaves(p))
    # with max_consecutive_errors=1 the second bad step in a row (5) is applied: NaN params
    p, s = run_both(optim.apply_if_finite(optim.adam(1e-2), 1),
                    ox.apply_if_finite(ox.adam(1e-2), 1), grads=grads[:6],
                    where="apply_if_finite forced")
    assert np.isnan(np.asarray(p["dense"]["w"])).any() and not bool(s.last_finite)


def test_zero_nans_records_where():
    rng = np.random.default_rng(4)
    grads = _with_bad_values([make_tree(rng) for _ in range(4)], [1, 3])
    _, s = run_both(optim.chain(optim.zero_nans(), optim.adam(1e-2)),
                    ox.chain(ox.zero_nans(), ox.adam(1e-2)),
                    grads=grads[:2], where="zero_nans")   # the last step has a NaN
    assert bool(s[0].found_nan["dense"]["w"]) and not bool(s[0].found_nan["dense"]["b"])


def test_inject_hyperparams_changed_between_steps():
    """A hyperparameter set in the state between steps is the one used, as in optax; the
    changed state works under jit (the values are traced, not baked in)."""
    rng = np.random.default_rng(5)
    p0 = make_tree(rng)
    grads = [make_tree(rng) for _ in range(6)]
    tx = optim.inject_hyperparams(optim.adam)(learning_rate=1e-2, b1=0.9)
    otx = ox.inject_hyperparams(ox.adam)(learning_rate=1e-2, b1=0.9)
    p, op = _f(p0), _j(p0)
    s, os_ = tx.init(p), otx.init(op)
    assert set(s.hyperparams) == {"learning_rate", "b1", "b2", "eps", "eps_root"}
    assert s.hyperparams["learning_rate"].dtype == np.float32
    step = traced(tx.update)
    for i, g in enumerate(grads):
        if i in (2, 4):
            lr, b1 = 1e-2 * (i + 1), 0.9 - 0.1 * i
            s.hyperparams["learning_rate"] = jnp.asarray(lr)
            s.hyperparams["b1"] = jnp.asarray(b1)
            os_.hyperparams["learning_rate"] = jax.numpy.asarray(lr)
            os_.hyperparams["b1"] = jax.numpy.asarray(b1)
        u, s = step(_f(g), s, p)
        p = optim.apply_updates(p, u)
        ou, os_ = otx.update(_j(g), os_, op)
        op = ox.apply_updates(op, ou)
        for a, b in zip(tree_util.tree_leaves(p), jax.tree.leaves(op)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), err_msg=f"step {i}", **TOL)
    compare_states(s, os_, "inject_hyperparams")
    assert float(s.hyperparams["learning_rate"]) == pytest.approx(5e-2)


def test_multi_steps_with_new_optimizers():
    run_both(optim.multi_steps(optim.lion(1e-3), 3), ox.MultiSteps(ox.lion(1e-3), 3),
             where="multi_steps(lion)")
    ms, oms = optim.MultiSteps(optim.radam(1e-2), 2), ox.MultiSteps(ox.radam(1e-2), 2)
    _, s = run_both(ms.gradient_transformation(), oms.gradient_transformation(), steps=5,
                    where="MultiSteps(radam)")
    assert not bool(ms.has_updated(s))                    # 5 micro-steps: one pending
    assert int(s.gradient_step) == 2


def test_tree_utils_match_optax():
    rng = np.random.default_rng(7)
    a, b = make_tree(rng), make_tree(rng)
    fa, fb, ja, jb = _f(a), _f(b), _j(a), _j(b)
    otu, jtu = optim.tree_utils, ox.tree_utils
    pairs = [
        ("tree_add", (fa, fb), (ja, jb)), ("tree_sub", (fa, fb), (ja, jb)),
        ("tree_mul", (fa, fb), (ja, jb)), ("tree_div", (fa, fb), (ja, jb)),
        ("tree_scale", (0.3, fa), (0.3, ja)), ("tree_add_scale", (fa, 0.3, fb), (ja, 0.3, jb)),
        ("tree_vdot", (fa, fb), (ja, jb)), ("tree_sum", (fa,), (ja,)),
        ("tree_max", (fa,), (ja,)), ("tree_min", (fa,), (ja,)),
        ("tree_norm", (fa,), (ja,)), ("tree_norm", (fa, 1), (ja, 1)),
        ("tree_norm", (fa, float("inf")), (ja, float("inf"))),
        ("tree_norm", (fa, None, True), (ja, None, True)),
        ("tree_zeros_like", (fa,), (ja,)), ("tree_ones_like", (fa,), (ja,)),
        ("tree_full_like", (fa, 0.5), (ja, 0.5)), ("tree_clip", (fa, -0.5, 0.5), (ja, -0.5, 0.5)),
        ("tree_where", (True, fa, fb), (True, ja, jb)),
        ("tree_update_moment", (fa, fb, 0.9, 2), (ja, jb, 0.9, 2)),
        ("tree_update_infinity_moment", (fa, fb, 0.9, 1e-3), (ja, jb, 0.9, 1e-3)),
        ("tree_update_moment_per_elem_norm", (fa, fb, 0.8, 2), (ja, jb, 0.8, 2)),
        ("tree_bias_correction", (fa, 0.9, jnp.asarray(3)), (ja, 0.9, jax.numpy.asarray(3))),
    ]
    for name, fargs, jargs in pairs:
        got, want = getattr(otu, name)(*fargs), getattr(jtu, name)(*jargs)
        gl, wl = tree_util.tree_leaves(got), jax.tree.leaves(want)
        assert len(gl) == len(wl), name
        for x, y in zip(gl, wl):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), err_msg=name, **TOL)
    assert otu.tree_size(fa) == jtu.tree_size(ja)
    keys = otu.tree_split_key_like(fnad.random.key(3), fa)
    jkeys = jtu.tree_split_key_like(jax.random.PRNGKey(3), ja)
    for x, y in zip(tree_util.tree_leaves(keys), jax.tree.leaves(jkeys)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ---- errors -----------------------------------------------------------------------------
def test_errors_are_clear():
    params = _f(make_tree(np.random.default_rng(0)))
    raises_with(lambda: optim.rmsprop(-1.0), "rmsprop", "learning_rate", exc=ValueError)
    raises_with(lambda: optim.lion(1e-3, b1=1.5), "b1", exc=ValueError)
    raises_with(lambda: optim.radam(1e-3, b2=-0.1), "b2", exc=ValueError)
    raises_with(lambda: optim.clip(-1.0), "clip", "max_delta", exc=ValueError)
    raises_with(lambda: optim.clip_by_block_rms(0.0), "threshold", exc=ValueError)
    raises_with(lambda: optim.polyak_sgd(variant="sps-"), "variant", exc=ValueError)
    pol = optim.polyak_sgd()
    raises_with(lambda: pol.update(params, pol.init(params), params), "value=loss",
                exc=ValueError)
    lamb = optim.lamb(1e-3)
    raises_with(lambda: lamb.update(params, lamb.init(params)), "add_decayed_weights",
                "needs the params", exc=ValueError)
    tr = optim.scale_by_trust_ratio()
    raises_with(lambda: tr.update(params, tr.init(params)), "scale_by_trust_ratio",
                "needs the params", exc=ValueError)
    raises_with(lambda: optim.sm3(1e-2).init(params), "sm3", "['s']", "scalar",
                exc=ValueError)
    raises_with(lambda: optim.masked(optim.sgd(0.1), {"dense": 1, "layers": True, "s": True}),
                "masked", "['dense']", "bool", exc=TypeError)
    bad = optim.masked(optim.sgd(0.1), {"dense": True, "other": True})
    raises_with(lambda: bad.init(params), "masked", "mask", exc=ValueError)
    mt = optim.multi_transform({"a": optim.sgd(0.1)}, {"dense": "a", "layers": "b", "s": "a"})
    raises_with(lambda: mt.init(params), "multi_transform", "'b'", exc=ValueError)
    raises_with(lambda: optim.multi_transform([optim.sgd(0.1)], "a"), "dict", exc=TypeError)
    raises_with(lambda: optim.apply_if_finite(optim.sgd(0.1), -1), "max_consecutive_errors",
                exc=ValueError)
    raises_with(lambda: optim.inject_hyperparams(optim.adam, static_args="lr"), "static_args",
                "learning_rate", exc=ValueError)
    raises_with(lambda: optim.inject_hyperparams(optim.adam)(1e-3, bogus=1),
                "inject_hyperparams", "bogus", exc=TypeError)
    raises_with(lambda: optim.inject_hyperparams(optim.adam)(-1e-3), "learning_rate",
                exc=ValueError)
    raises_with(lambda: optim.add_noise(-0.1, 0.5, key=0), "eta", exc=ValueError)
    raises_with(lambda: optim.add_noise(0.1, 0.5, key=0, seed=1), "only one", exc=ValueError)


def test_jit_train_step_with_new_optimizer():
    """A whole train step (loss, grad, clip, lion with a schedule, its hyperparameters
    injected into the state) under jit."""
    tx = optim.chain(optim.clip_by_global_norm(1.0),
                     optim.inject_hyperparams(optim.lion)(
                         optim.warmup_exponential_decay_schedule(0.0, 0.2, 2, 10, 0.8),
                         weight_decay=0.0))
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(32, 3)).astype(np.float32))
    y = x @ jnp.asarray([1.0, -2.0, 0.5]) + 0.3

    def loss(p):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    @traced
    def train_step(p, s):
        val, g = fnad.value_and_grad(loss)(p)
        u, s = tx.update(g, s, p)
        return optim.apply_updates(p, u), s, val

    p = {"w": jnp.full(3, 0.1), "b": jnp.full((), 0.1)}
    s = tx.init(p)
    losses = []
    for _ in range(30):
        p, s, val = train_step(p, s)
        losses.append(float(val))
    assert losses[-1] < 0.2 * losses[0], losses
    assert int(s[1].count) == 30
