"""fnad.optim: optimizers, schedules, clipping and gradient accumulation.

Every optimizer runs 12 steps on a random pytree (nested dicts and lists, float32 and
float64) and is checked at each step against a NumPy transcription of its update equations
(always) and against optax (when installed). Schedules are checked against the formulas
at chosen steps, eager and under jit; gradient accumulation against the full-batch
gradient; jitted steps against eager ones; bad input against clear errors.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from checks import TEST_BACKEND, raises_with, traced

import fnad
import fnad.numpy as jnp
from fnad import optim, tree_util

STEPS = 12
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}


def _optax():
    return pytest.importorskip("optax", reason="optax not installed: it is the oracle here")


# ---- random pytrees ---------------------------------------------------------------------
def make_tree(rng, dtype):
    """Nested dicts and lists of arrays of several ranks, including a scalar."""
    def r(*shape):
        return rng.normal(size=shape).astype(dtype)
    return {"dense": {"w": r(3, 4), "b": r(4)},
            "layers": [{"scale": r(4)}, {"w": r(2, 3, 2)}],
            "s": r()}


def grad_sequence(dtype, n=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [make_tree(rng, dtype) for _ in range(n)]


def to_fnad(tree):
    return tree_util.tree_map(jnp.asarray, tree)


def to_np(tree):
    return tree_util.tree_map(np.asarray, tree)


def assert_trees_close(got, want, dtype, where=""):
    g, gd = tree_util.tree_flatten(to_np(got))
    w, wd = tree_util.tree_flatten(to_np(want))
    assert gd == wd, f"{where}: structures differ {gd} vs {wd}"
    for a, b in zip(g, w):
        assert a.dtype == np.dtype(dtype), f"{where}: dtype {a.dtype}, want {dtype}"
        np.testing.assert_allclose(a, b.astype(np.float64), err_msg=where, **TOL[dtype])


# ---- NumPy transcriptions of the update equations ---------------------------------------
def np_warmup_cosine(t, init, peak, warmup, decay, end):
    """Seed 001's warmup + cosine, generalised to a nonzero initial value."""
    if t < warmup:
        return np_linear(t, init, peak, warmup)
    progress = min(t - warmup, decay - warmup) / (decay - warmup)
    value = end + 0.5 * (peak - end) * (1 + math.cos(math.pi * progress))
    # where(t < W, float32 ramp, weakly typed cosine) is float32 (as in optax) when W > 0
    return float(np.float32(value)) if warmup > 0 else value


def np_linear(t, init, end, steps, begin=0):
    """I + (E - I)·clip(t - B, 0, T)/T, in float32 arithmetic as optax and fnad do it: an
    int32 count divided by an int is float32 in JAX's promotion rules, even with x64."""
    f32 = np.float32
    frac = f32(1) - f32(min(max(t - begin, 0), steps)) / f32(steps)
    return float(f32(init - end) * frac + f32(end))


def np_run(kind, params, grads_seq, *, lr, momentum=0.0, nesterov=False, b1=0.9, b2=0.999,
           eps=1e-8, wd=0.0, mask=None, clip=None):
    """The params after each step, in float64, from the docstrings' equations."""
    lr_fn = lr if callable(lr) else (lambda t: lr)
    p, treedef = tree_util.tree_flatten(to_np(params))
    p = [x.astype(np.float64) for x in p]
    flags = [True] * len(p) if mask is None else tree_util.tree_leaves(mask)
    m = [np.zeros_like(x) for x in p]
    v = [np.zeros_like(x) for x in p]
    out = []
    for t, grads in enumerate(grads_seq):               # t: updates taken before this one
        g = [x.astype(np.float64) for x in tree_util.tree_leaves(to_np(grads))]
        if clip is not None:
            norm = math.sqrt(sum(float(np.sum(x * x)) for x in g))
            if norm >= clip:
                g = [x * clip / norm for x in g]
        if kind == "sgd":
            if momentum or nesterov:
                m = [gi + momentum * mi for gi, mi in zip(g, m)]
                u = [gi + momentum * mi for gi, mi in zip(g, m)] if nesterov else m
            else:
                u = g
        else:                                           # adam / adamw
            m = [b1 * mi + (1 - b1) * gi for gi, mi in zip(g, m)]
            v = [b2 * vi + (1 - b2) * gi * gi for gi, vi in zip(g, v)]
            u = [(mi / (1 - b1 ** (t + 1))) / (np.sqrt(vi / (1 - b2 ** (t + 1))) + eps)
                 for mi, vi in zip(m, v)]
            if kind == "adamw":
                u = [ui + wd * pi if f else ui for ui, pi, f in zip(u, p, flags)]
        p = [pi - lr_fn(t) * ui for pi, ui in zip(p, u)]
        out.append(tree_util.tree_unflatten(treedef, p))
    return out


def _ndim_mask(params):
    return tree_util.tree_map(lambda x: bool(np.ndim(x) >= 2), params)


SCHED = dict(init=0.0, peak=3e-2, warmup=3, decay=10, end=3e-3)

# name -> (fnad optimizer, optax optimizer (given the module), np_run keyword arguments)
CASES = {
    "sgd": (lambda: optim.sgd(0.1), lambda ox: ox.sgd(0.1), dict(kind="sgd", lr=0.1)),
    "sgd_momentum": (lambda: optim.sgd(0.05, momentum=0.9),
                     lambda ox: ox.sgd(0.05, momentum=0.9),
                     dict(kind="sgd", lr=0.05, momentum=0.9)),
    "sgd_nesterov": (lambda: optim.sgd(0.05, momentum=0.9, nesterov=True),
                     lambda ox: ox.sgd(0.05, momentum=0.9, nesterov=True),
                     dict(kind="sgd", lr=0.05, momentum=0.9, nesterov=True)),
    "sgd_linear_warmup": (
        lambda: optim.sgd(optim.linear_schedule(0.0, 0.1, 5)),
        lambda ox: ox.sgd(ox.linear_schedule(0.0, 0.1, 5)),
        dict(kind="sgd", lr=lambda t: np_linear(t, 0.0, 0.1, 5))),
    "adam": (lambda: optim.adam(1e-2), lambda ox: ox.adam(1e-2), dict(kind="adam", lr=1e-2)),
    "adam_betas": (lambda: optim.adam(3e-2, b1=0.8, b2=0.99, eps=1e-6),
                   lambda ox: ox.adam(3e-2, b1=0.8, b2=0.99, eps=1e-6),
                   dict(kind="adam", lr=3e-2, b1=0.8, b2=0.99, eps=1e-6)),
    "adamw": (lambda: optim.adamw(1e-2, weight_decay=0.1),
              lambda ox: ox.adamw(1e-2, weight_decay=0.1),
              dict(kind="adamw", lr=1e-2, wd=0.1)),
    "adamw_warmup_cosine": (
        lambda: optim.adamw(optim.warmup_cosine_decay_schedule(
            SCHED["init"], SCHED["peak"], SCHED["warmup"], SCHED["decay"], SCHED["end"]),
            weight_decay=0.1),
        lambda ox: ox.adamw(ox.warmup_cosine_decay_schedule(
            SCHED["init"], SCHED["peak"], SCHED["warmup"], SCHED["decay"], SCHED["end"]),
            weight_decay=0.1),
        dict(kind="adamw", wd=0.1, lr=lambda t: np_warmup_cosine(t, *SCHED.values()))),
    "adamw_mask_tree": (
        lambda: optim.adamw(1e-2, weight_decay=0.5, mask={
            "dense": {"w": True, "b": False}, "layers": [{"scale": False}, {"w": True}],
            "s": False}),
        lambda ox: ox.adamw(1e-2, weight_decay=0.5, mask={
            "dense": {"w": True, "b": False}, "layers": [{"scale": False}, {"w": True}],
            "s": False}),
        dict(kind="adamw", lr=1e-2, wd=0.5, mask={
            "dense": {"b": False, "w": True}, "layers": [{"scale": False}, {"w": True}],
            "s": False})),
    "adamw_mask_callable": (
        lambda: optim.adamw(1e-2, weight_decay=0.5, mask=_ndim_mask),
        lambda ox: ox.adamw(1e-2, weight_decay=0.5, mask=_ndim_mask),
        dict(kind="adamw", lr=1e-2, wd=0.5, mask={
            "dense": {"b": False, "w": True}, "layers": [{"scale": False}, {"w": True}],
            "s": False})),
    "clip_then_adamw": (
        lambda: optim.chain(optim.clip_by_global_norm(2.0), optim.adamw(1e-2, weight_decay=0.1)),
        lambda ox: ox.chain(ox.clip_by_global_norm(2.0), ox.adamw(1e-2, weight_decay=0.1)),
        dict(kind="adamw", lr=1e-2, wd=0.1, clip=2.0)),
    "clip_then_sgd": (
        lambda: optim.chain(optim.clip_by_global_norm(2.0), optim.sgd(0.1)),
        lambda ox: ox.chain(ox.clip_by_global_norm(2.0), ox.sgd(0.1)),
        dict(kind="sgd", lr=0.1, clip=2.0)),
}


def run_fnad(tx, params, grads_seq, step=None):
    """The params after each of the steps, with `step(grads, state, params)` (default eager)."""
    step = step or tx.update
    state = tx.init(params)
    out = []
    for g in grads_seq:
        updates, state = step(to_fnad(g), state, params)
        params = optim.apply_updates(params, updates)
        out.append(params)
    return out, state


@pytest.fixture(params=[np.float32, np.float64], ids=["f32", "f64"])
def dtype(request):
    if request.param == np.float64:
        request.getfixturevalue("x64")
    return request.param


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy_equations(name, dtype):
    make, _, ref_kw = CASES[name]
    params = to_fnad(make_tree(np.random.default_rng(0), dtype))
    grads = grad_sequence(dtype)
    got, _ = run_fnad(make(), params, grads)
    want = np_run(params=params, grads_seq=grads, **ref_kw)
    for i, (a, b) in enumerate(zip(got, want)):
        assert_trees_close(a, b, dtype, f"{name} step {i}")


@pytest.mark.parametrize("name", list(CASES))
def test_matches_optax(name, dtype):
    ox = _optax()
    import jax
    import jax.numpy as jjnp
    make, make_ox, _ = CASES[name]
    params = to_fnad(make_tree(np.random.default_rng(0), dtype))
    grads = grad_sequence(dtype)
    got, _ = run_fnad(make(), params, grads)
    tx = make_ox(ox)
    op = jax.tree.map(jjnp.asarray, to_np(params))
    ostate = tx.init(op)
    for i, g in enumerate(grads):
        u, ostate = tx.update(jax.tree.map(jjnp.asarray, g), ostate, op)
        op = ox.apply_updates(op, u)
        assert_trees_close(got[i], jax.tree.map(np.asarray, op), dtype, f"{name} step {i}")


def test_state_is_a_fixed_pytree_of_arrays():
    tx = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(
        optim.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 8, 1e-3), weight_decay=0.1))
    params = to_fnad(make_tree(np.random.default_rng(0), np.float32))
    state = tx.init(params)
    leaves = tree_util.tree_leaves(state)
    assert leaves and all(isinstance(x, fnad.Array) for x in leaves)
    counts = [x for x in leaves if x.shape == () and x.dtype == np.int32]
    assert len(counts) == 2                             # adam's count, the schedule's count
    _, new = tx.update(to_fnad(grad_sequence(np.float32, 1)[0]), state, params)
    assert tree_util.tree_structure(new) == tree_util.tree_structure(state)
    assert [int(c) for c in tree_util.tree_leaves(new) if c.dtype == np.int32] == [1, 1]


@pytest.mark.parametrize("backend", ["numpy", "numba", "xla"])
def test_jit_step_equals_eager(backend):
    if backend == "xla":
        pytest.importorskip("jax", reason="jax not installed: the xla backend runs on jax")
    tx = optim.chain(optim.clip_by_global_norm(3.0), optim.adamw(
        optim.warmup_cosine_decay_schedule(0.0, 3e-2, 3, 10, 3e-3), weight_decay=0.1,
        mask=_ndim_mask))
    params = to_fnad(make_tree(np.random.default_rng(0), np.float32))
    grads = grad_sequence(np.float32)
    eager, _ = run_fnad(tx, params, grads)
    step = fnad.jit(tx.update, backend=backend)
    jitted, state = run_fnad(tx, params, grads, step=step)
    for i, (a, b) in enumerate(zip(jitted, eager)):
        for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b)):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{backend} step {i}")
    assert int(state[1][0].count) == STEPS


def test_jit_train_step_with_grad_and_update():
    """A whole train step (loss, grad, clip, adamw with a schedule) under jit."""
    tx = optim.chain(optim.clip_by_global_norm(1.0),
                     optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 20, 0.01)))
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(32, 3)).astype(np.float32))
    y = x @ jnp.asarray([1.0, -2.0, 0.5]) + 0.3

    def loss(p):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    def train_step(p, s):
        l, g = fnad.value_and_grad(loss)(p)
        u, s = tx.update(g, s, p)
        return optim.apply_updates(p, u), s, l

    p = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    s = tx.init(p)
    pe, se = p, s
    step = traced(train_step)
    losses = []
    for _ in range(20):
        p, s, l = step(p, s)
        pe, se, _ = train_step(pe, se)
        losses.append(float(l))
    np.testing.assert_allclose(np.asarray(p["w"]), np.asarray(pe["w"]), rtol=1e-5, atol=1e-6)
    assert losses[-1] < 0.2 * losses[0], f"loss did not go down on {TEST_BACKEND}: {losses}"


# ---- schedules ------------------------------------------------------------------------
STEPS_TO_CHECK = [0, 1, 2, 4, 5, 6, 9, 15, 40, 55, 100, 250]


@pytest.mark.parametrize("init,peak,warmup,decay,end", [
    (0.0, 1e-3, 5, 50, 1e-4),                 # seed 001: I = 0, min_lr = 0.1 · base_lr
    (1e-4, 2e-3, 10, 100, 0.0),
    (0.5, 1.0, 0, 40, 0.25),                  # no warmup
])
def test_warmup_cosine_values(init, peak, warmup, decay, end):
    sched = optim.warmup_cosine_decay_schedule(init, peak, warmup, decay, end)
    jitted = fnad.jit(sched)
    for t in STEPS_TO_CHECK:
        want = np_warmup_cosine(t, init, peak, warmup, decay, end)
        np.testing.assert_allclose(float(sched(t)), want, rtol=1e-5, atol=1e-9, err_msg=f"{t}")
        got = float(jitted(jnp.asarray(t, jnp.int32)))         # a traced int32 count
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, err_msg=f"jit {t}")
    assert float(sched(warmup)) == pytest.approx(peak, rel=1e-6)
    assert float(sched(decay + 7)) == pytest.approx(end, rel=1e-6, abs=1e-12)


def test_seed001_schedule():
    """Seed 001 §3.2 with its defaults scaled down: warmup 1000 → 10, total 100000 → 1000."""
    base, W, total = 3e-4, 10, 1000
    sched = optim.warmup_cosine_decay_schedule(0.0, base, W, total, 0.1 * base)
    for step in [0, 3, 10, 11, 500, 999]:
        if step < W:
            lr = base * step / W
        else:
            progress = (step - W) / (total - W)
            lr = 0.1 * base + 0.5 * (base - 0.1 * base) * (1 + math.cos(math.pi * progress))
        assert float(sched(step)) == pytest.approx(lr, rel=1e-5, abs=1e-12)


def test_schedules_match_optax():
    ox = _optax()
    pairs = [
        (optim.warmup_cosine_decay_schedule(0.0, 1e-3, 5, 50, 1e-4),
         ox.warmup_cosine_decay_schedule(0.0, 1e-3, 5, 50, 1e-4)),
        (optim.warmup_cosine_decay_schedule(1e-4, 2e-3, 7, 30, 0.0, exponent=2.0),
         ox.warmup_cosine_decay_schedule(1e-4, 2e-3, 7, 30, 0.0, exponent=2.0)),
        (optim.linear_schedule(0.2, 1.0, 8, transition_begin=3),
         ox.linear_schedule(0.2, 1.0, 8, transition_begin=3)),
        (optim.cosine_decay_schedule(0.7, 20, alpha=0.1), ox.cosine_decay_schedule(0.7, 20, 0.1)),
        (optim.constant_schedule(0.3), ox.constant_schedule(0.3)),
    ]
    for i, (ours, theirs) in enumerate(pairs):
        for t in STEPS_TO_CHECK:
            np.testing.assert_allclose(float(ours(t)), float(theirs(t)), rtol=1e-6, atol=1e-10,
                                       err_msg=f"schedule {i} at step {t}")


def test_linear_and_cosine_values():
    lin = optim.linear_schedule(0.0, 2.0, 4, transition_begin=2)
    assert [float(lin(t)) for t in range(8)] == pytest.approx(
        [np_linear(t, 0.0, 2.0, 4, 2) for t in range(8)])
    cos = optim.cosine_decay_schedule(1.0, 10, alpha=0.2)
    for t in [0, 5, 10, 20]:
        want = 0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi * min(t, 10) / 10))
        assert float(cos(t)) == pytest.approx(want, rel=1e-6)
    assert optim.constant_schedule(0.25)(jnp.asarray(7, jnp.int32)) == 0.25


def test_schedule_is_evaluated_on_the_step_count():
    """sgd with a linear schedule: update t uses η(t), t counting from 0."""
    tx = optim.sgd(optim.linear_schedule(1.0, 0.0, 4))
    p = {"w": jnp.zeros(())}
    s = tx.init(p)
    lrs = []
    for _ in range(6):
        u, s = tx.update({"w": jnp.ones(())}, s, p)
        lrs.append(-float(u["w"]))
    assert lrs == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0, 0.0])


# ---- clipping, chain, mask --------------------------------------------------------------
def test_global_norm_and_clip():
    g = to_fnad(grad_sequence(np.float32, 1)[0])
    leaves = [np.asarray(x, np.float64) for x in tree_util.tree_leaves(g)]
    norm = math.sqrt(sum(float(np.sum(x * x)) for x in leaves))
    assert float(optim.global_norm(g)) == pytest.approx(norm, rel=1e-6)
    big = optim.clip_by_global_norm(norm * 2)
    u, _ = big.update(g, big.init(g))
    for a, b in zip(tree_util.tree_leaves(u), leaves):
        np.testing.assert_array_equal(np.asarray(a), b.astype(np.float32))   # untouched
    small = optim.clip_by_global_norm(norm / 4)
    u, _ = small.update(g, small.init(g))
    assert float(optim.global_norm(u)) == pytest.approx(norm / 4, rel=1e-5)
    for a, b in zip(tree_util.tree_leaves(u), leaves):
        np.testing.assert_allclose(np.asarray(a), b / 4, rtol=1e-5, atol=1e-7)  # same direction


def test_clip_matches_optax():
    ox = _optax()
    import jax
    g = grad_sequence(np.float32, 1)[0]
    for max_norm in [0.5, 3.0, 100.0]:
        u, _ = optim.clip_by_global_norm(max_norm).update(to_fnad(g), optim.EmptyState())
        ou, _ = ox.clip_by_global_norm(max_norm).update(jax.tree.map(jax.numpy.asarray, g), ())
        assert_trees_close(u, jax.tree.map(np.asarray, ou), np.float32, f"clip {max_norm}")


def test_chain_threads_updates_and_states():
    g = to_fnad(grad_sequence(np.float32, 1)[0])
    tx = optim.chain(optim.scale(2.0), optim.clip_by_global_norm(1.0), optim.sgd(0.5))
    state = tx.init(g)
    assert isinstance(state, tuple) and len(state) == 3
    u, new = tx.update(g, state, g)
    doubled = tree_util.tree_map(lambda x: 2.0 * x, g)
    clipped, _ = optim.clip_by_global_norm(1.0).update(doubled, optim.EmptyState())
    want = tree_util.tree_map(lambda x: -0.5 * x, clipped)
    assert_trees_close(u, want, np.float32, "chain")
    assert tree_util.tree_structure(new) == tree_util.tree_structure(state)


def test_adamw_mask_excludes_leaves_from_decay():
    """With zero gradients Adam's step is 0, so only the decay moves params: masked leaves
    shrink by η·λ·p, unmasked ones stay put."""
    params = {"w": jnp.full((2, 2), 3.0), "norm": {"scale": jnp.ones(2), "bias": jnp.ones(2)}}
    zeros = tree_util.tree_map(jnp.zeros_like, params)
    for mask in [{"w": True, "norm": False},                   # a prefix of the params
                 {"w": True, "norm": {"scale": False, "bias": False}},
                 lambda p: tree_util.tree_map(lambda x: x.ndim == 2, p)]:
        tx = optim.adamw(0.1, weight_decay=0.5, mask=mask)
        u, _ = tx.update(zeros, tx.init(params), params)
        np.testing.assert_allclose(np.asarray(u["w"]), -0.1 * 0.5 * 3.0, rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(u["norm"]["scale"]), 0.0)
        np.testing.assert_array_equal(np.asarray(u["norm"]["bias"]), 0.0)
    tx = optim.adamw(0.1, weight_decay=0.5)                  # no mask: everything decays
    u, _ = tx.update(zeros, tx.init(params), params)
    np.testing.assert_allclose(np.asarray(u["norm"]["bias"]), -0.05, rtol=1e-6)


def test_apply_updates_keeps_param_dtype():
    p = {"a": jnp.ones(3, jnp.bfloat16), "b": jnp.ones(2)}
    new = optim.apply_updates(p, {"a": jnp.full(3, 0.5), "b": jnp.full(2, 0.25)})
    assert new["a"].dtype == jnp.bfloat16 and new["b"].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(new["a"], np.float32), 1.5)


# ---- gradient accumulation ------------------------------------------------------------
def _regression_data(n=32, d=5, seed=4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ rng.normal(size=(d,)) + 0.1 * rng.normal(size=(n,))).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


def _mlp_loss(p, batch):
    h = jnp.tanh(batch["x"] @ p["w1"] + p["b1"])                 # [N, H]
    pred = h @ p["w2"]                                           # [N]
    return jnp.mean((pred - batch["y"]) ** 2)


def _mlp_params(d=5, h=8, seed=5):
    rng = np.random.default_rng(seed)
    return to_fnad({"w1": (0.5 * rng.normal(size=(d, h))).astype(np.float32),
                    "b1": np.zeros(h, np.float32),
                    "w2": (0.5 * rng.normal(size=(h,))).astype(np.float32)})


def test_accumulate_gradients_equals_full_batch():
    x, y = _regression_data()

    def linreg(p, batch):
        return jnp.mean((batch["x"] @ p["w"] + p["b"] - batch["y"]) ** 2)

    for loss_fn, params in [(linreg, {"w": jnp.ones(5), "b": jnp.asarray(0.5)}),
                            (_mlp_loss, _mlp_params())]:
        full_l, full_g = fnad.value_and_grad(loss_fn)(params, {"x": x, "y": y})
        micro = {"x": x.reshape(4, 8, 5), "y": y.reshape(4, 8)}     # 4 micro-batches of 8
        jitted = fnad.jit(lambda p, m, f=loss_fn: optim.accumulate_gradients(f, p, m),
                          backend=TEST_BACKEND)
        for l, g in [optim.accumulate_gradients(loss_fn, params, micro), jitted(params, micro)]:
            assert float(l) == pytest.approx(float(full_l), rel=1e-5)
            for a, b in zip(tree_util.tree_leaves(g), tree_util.tree_leaves(full_g)):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_accumulate_gradients_has_aux():
    x, y = _regression_data()

    def loss(p, batch):
        l = _mlp_loss(p, batch)
        return l, {"l": l, "n": batch["y"].shape[0]}

    micro = {"x": x.reshape(4, 8, 5), "y": y.reshape(4, 8)}
    (l, aux), g = optim.accumulate_gradients(loss, _mlp_params(), micro, has_aux=True)
    per = [float(_mlp_loss(_mlp_params(), {"x": micro["x"][i], "y": micro["y"][i]}))
           for i in range(4)]
    np.testing.assert_allclose(np.asarray(aux["l"]), per, rtol=1e-5)   # aux stacked [M]
    assert float(l) == pytest.approx(sum(per) / 4, rel=1e-5)


def _micro_grads(params, x, y, k):
    bx, by = x.reshape(k, -1, x.shape[-1]), y.reshape(k, -1)
    return [fnad.grad(_mlp_loss)(params, {"x": bx[i], "y": by[i]}) for i in range(k)]


def test_multi_steps_updates_every_k():
    x, y = _regression_data()
    params = _mlp_params()
    k = 4
    inner = optim.adam(1e-2)
    tx = optim.multi_steps(inner, k)
    state = tx.init(params)
    p = params
    step = traced(tx.update)
    for rnd in range(2):
        micro = _micro_grads(p, x, y, k)
        for i, g in enumerate(micro):
            u, state = step(g, state, p)
            zero = all(not np.any(np.asarray(a)) for a in tree_util.tree_leaves(u))
            assert zero == (i < k - 1), f"round {rnd} micro-step {i}: update zero={zero}"
            assert int(state.mini_step) == (i + 1) % k
            p = optim.apply_updates(p, u)
        assert int(state.gradient_step) == rnd + 1
    # the same as adam on the full-batch gradient, twice
    q, s = params, inner.init(params)
    for _ in range(2):
        g = fnad.grad(_mlp_loss)(q, {"x": x, "y": y})
        u, s = inner.update(g, s, q)
        q = optim.apply_updates(q, u)
    for a, b in zip(tree_util.tree_leaves(p), tree_util.tree_leaves(q)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_multi_steps_matches_optax():
    ox = _optax()
    import jax
    grads = grad_sequence(np.float32)
    params = to_fnad(make_tree(np.random.default_rng(0), np.float32))
    got, _ = run_fnad(optim.multi_steps(optim.adamw(1e-2, weight_decay=0.1), 3), params, grads)
    tx = ox.MultiSteps(ox.adamw(1e-2, weight_decay=0.1), 3)
    op = jax.tree.map(jax.numpy.asarray, to_np(params))
    s = tx.init(op)
    for i, g in enumerate(grads):
        u, s = tx.update(jax.tree.map(jax.numpy.asarray, g), s, op)
        op = ox.apply_updates(op, u)
        assert_trees_close(got[i], jax.tree.map(np.asarray, op), np.float32, f"step {i}")


def test_multi_steps_sum_mode_and_bf16_accumulator():
    g = {"w": jnp.ones(2, jnp.bfloat16)}
    tx = optim.multi_steps(optim.sgd(1.0), 2, use_grad_mean=False)
    s = tx.init(g)
    assert s.acc_grads["w"].dtype == np.float32                 # accumulates in f32
    u, s = tx.update(g, s, g)
    u, s = tx.update(g, s, g)
    assert u["w"].dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(u["w"], np.float32), -2.0)


# ---- errors ---------------------------------------------------------------------------
def test_bad_hyperparameters():
    raises_with(lambda: optim.sgd(-0.1), "sgd", "learning_rate", "-0.1", exc=ValueError)
    raises_with(lambda: optim.adam(float("nan")), "adam", "learning_rate", exc=ValueError)
    raises_with(lambda: optim.adamw("1e-3"), "adamw", "learning_rate", exc=TypeError)
    raises_with(lambda: optim.adam(1e-3, b1=1.0), "b1", "[0.0, 1.0)", exc=ValueError)
    raises_with(lambda: optim.adamw(1e-3, weight_decay=-1.0), "weight_decay", exc=ValueError)
    raises_with(lambda: optim.sgd(0.1, momentum=-0.5), "momentum", exc=ValueError)
    raises_with(lambda: optim.clip_by_global_norm(0.0), "max_norm", exc=ValueError)
    raises_with(lambda: optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 10),
                "decay_steps", "warmup_steps", exc=ValueError)
    raises_with(lambda: optim.warmup_cosine_decay_schedule(0.0, 1.0, 2.5, 10),
                "warmup_steps", "int", exc=TypeError)
    raises_with(lambda: optim.multi_steps(optim.sgd(0.1), 0), "every_k", exc=ValueError)
    raises_with(lambda: optim.multi_steps(lambda g: g, 2), "GradientTransformation",
                exc=TypeError)
    raises_with(lambda: optim.chain(optim.sgd(0.1), "adam"), "chain", "argument 1",
                exc=TypeError)


def test_mismatched_tree_structure_is_named():
    params = {"w": jnp.ones(3), "b": jnp.ones(())}
    tx = optim.adam(1e-3)
    state = tx.init(params)
    msg = raises_with(lambda: tx.update({"w": jnp.ones(3)}, state, params),
                      "scale_by_adam", "structure", "mu", "init", exc=ValueError)
    assert "'b'" in msg or "keys" in msg, msg
    msg = raises_with(lambda: tx.update({"w": jnp.ones(3), "b": [jnp.ones(())]}, state),
                      "structure", "['b']", exc=ValueError)
    sgd = optim.sgd(0.1, momentum=0.9)
    raises_with(lambda: sgd.update([jnp.ones(3)], sgd.init(params)), "trace", "structure",
                exc=ValueError)
    raises_with(lambda: optim.apply_updates(params, {"w": jnp.ones(3)}), "apply_updates",
                "structure", exc=ValueError)
    ms = optim.multi_steps(optim.sgd(0.1), 2)
    raises_with(lambda: ms.update({"w": jnp.ones(3)}, ms.init(params)), "multi_steps",
                "structure", exc=ValueError)


def test_adamw_needs_params_and_a_valid_mask():
    params = {"w": jnp.ones(3), "b": jnp.ones(())}
    g = tree_util.tree_map(jnp.ones_like, params)
    tx = optim.adamw(1e-3)
    raises_with(lambda: tx.update(g, tx.init(params)), "needs the params", exc=ValueError)
    bad = optim.adamw(1e-3, mask={"w": True, "x": False})
    raises_with(lambda: bad.update(g, bad.init(params), params), "mask", exc=ValueError)
    raises_with(lambda: optim.adamw(1e-3, mask={"w": True, "b": "no"}), "mask", "['b']",
                "bool", exc=TypeError)


def test_accumulate_gradients_bad_batches():
    raises_with(lambda: optim.accumulate_gradients(
        _mlp_loss, _mlp_params(), {"x": jnp.ones((4, 8, 5)), "y": jnp.ones((3, 8))}),
        "micro-batch", "[3, 4]", exc=ValueError)
