"""Transformations composed with each other, against the same compositions in jax.

Each composition is written once against a library (`ad` is fnad or jax, `np_`/`nn_` its
numpy and nn namespaces) and run in both: per-example gradients (vmap of grad), MAML
(grad of a loss taken after an inner grad step, vmapped over tasks), grad of vmap, vmap of
jvp, jvp of grad (Hessian-vector products), vmap of vmap, linearize inside vmap, vjp of
vmap, and Jacobians under vmap. Results must agree with jax's in tree structure, shapes,
dtypes, weak types and values. Shape letters: B batch, T tasks, D features, H hidden,
K classes.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest

import fnad
import fnad.nn as fnn
import fnad.numpy as fnp
from fnad import tree_util

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.numpy as jnp  # noqa: E402

TOL = dict(rtol=2e-4, atol=2e-5)


def rng_for(*names) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(names).encode()))


def normal(r, *shape, scale=1.0, dtype=np.float32):
    return np.asarray(scale * r.standard_normal(shape), dtype)


def assert_trees_close(got, want, *, rtol, atol, what=""):
    """Same structure, shapes, dtypes and weak types; values within rtol + atol·max|want|."""
    assert tree_util.tree_structure(tree_util.tree_map(lambda _: 0, got)) == \
        tree_util.tree_structure(jax.tree_util.tree_map(lambda _: 0, want)), \
        f"{what}: tree structure differs:\n fnad {got}\n jax  {want}"
    for i, (g, w) in enumerate(zip(tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
        where = f"{what} leaf {i}"
        assert not isinstance(g, fnad.core.Tracer), f"{where}: a tracer escaped: {g!r}"
        g_weak, w_weak = getattr(g, "weak_type", False), getattr(w, "weak_type", False)
        assert g_weak == w_weak, f"{where}: weak_type {g_weak} != jax's {w_weak}"
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{where}: shape {g.shape} != jax's {w.shape}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != jax's {w.dtype}"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=where)


def compare(composition, *args, tol=TOL):
    """composition(ad, np_, nn_, *args) in fnad and in (jitted) jax must agree."""
    got = composition(fnad, fnp, fnn, *args)
    want = jax.jit(functools.partial(composition, jax, jnp, jax.nn))(*args)
    assert_trees_close(got, want, **tol, what=composition.__name__)
    return got


# ---- models and losses, each written once -----------------------------------------------------
def mlp_params(r, d=3, h=5, k=2):
    return {"w1": normal(r, d, h, scale=0.5), "b1": normal(r, h, scale=0.1),
            "w2": normal(r, h, k, scale=0.5), "b2": normal(r, k, scale=0.1)}


def mlp(np_, p, x):                                       # [D] -> [K] (or [B, D] -> [B, K])
    h = np_.tanh(x @ p["w1"] + p["b1"])                   # [.., H]
    return h @ p["w2"] + p["b2"]                          # [.., K]


def mse_loss(np_, nn_, p, x, y):                          # one example: x [D], y [K]
    return np_.mean((mlp(np_, p, x) - y) ** 2)


def xent_loss(np_, nn_, p, x, label):                     # one example: label an int
    logp = nn_.log_softmax(mlp(np_, p, x))                # [K]
    return -np_.sum(logp * nn_.one_hot(label, logp.shape[-1]))


def logistic_loss(np_, nn_, wb, x, y):                    # wb = (w [D], b []), y in {0, 1}
    w, b = wb
    z = x @ w + b
    return nn_.softplus(z) - y * z


# ---- per-example gradients: vmap(grad(loss), in_axes=(None, 0, 0)) --------------------------
def per_example_mse(ad, np_, nn_, p, xs, ys):
    return ad.vmap(ad.grad(functools.partial(mse_loss, np_, nn_)), in_axes=(None, 0, 0))(
        p, xs, ys)


def per_example_xent(ad, np_, nn_, p, xs, labels):
    return ad.vmap(ad.grad(functools.partial(xent_loss, np_, nn_)), in_axes=(None, 0, 0))(
        p, xs, labels)


def per_example_logistic(ad, np_, nn_, wb, xs, ys):
    return ad.vmap(ad.grad(functools.partial(logistic_loss, np_, nn_)), in_axes=(None, 0, 0))(
        wb, xs, ys)


def per_example_value_and_grad_with_aux(ad, np_, nn_, p, xs, ys):
    def loss(p, x, y):
        pred = mlp(np_, p, x)
        return np_.mean((pred - y) ** 2), {"pred": pred}
    return ad.vmap(ad.value_and_grad(loss, has_aux=True), in_axes=(None, 0, 0))(p, xs, ys)


def per_example_grad_norms(ad, np_, nn_, p, xs, ys):      # DP-SGD style: clip each example
    g = per_example_mse(ad, np_, nn_, p, xs, ys)          # leaves [B, ...]
    sq = sum(np_.sum(v.reshape(v.shape[0], -1) ** 2, axis=1) for v in g.values())   # [B]
    scale = np_.minimum(1.0, 0.5 / np_.sqrt(sq))          # [B]
    return {k: np_.mean(v * scale.reshape((-1,) + (1,) * (v.ndim - 1)), axis=0)
            for k, v in g.items()}


def test_per_example_gradients_mse():
    r = rng_for("pe-mse")
    p, xs, ys = mlp_params(r), normal(r, 4, 3), normal(r, 4, 2)
    g = compare(per_example_mse, p, xs, ys)
    for b in range(4):                                    # row b is example b's own gradient
        gb = fnad.grad(functools.partial(mse_loss, fnp, fnn))(p, xs[b], ys[b])
        for k in p:
            np.testing.assert_allclose(g[k][b], gb[k], rtol=1e-5, atol=1e-6)


def test_per_example_gradients_cross_entropy_integer_labels():
    r = rng_for("pe-xent")
    compare(per_example_xent, mlp_params(r, k=3), normal(r, 5, 3),
            np.array([0, 2, 1, 1, 0], np.int32))


def test_per_example_gradients_tuple_params():
    r = rng_for("pe-logistic")
    wb = (normal(r, 3), np.float32(0.2))
    compare(per_example_logistic, wb, normal(r, 6, 3), np.array([0, 1, 1, 0, 1, 0], np.float32))


def test_per_example_value_and_grad_with_aux():
    r = rng_for("pe-aux")
    compare(per_example_value_and_grad_with_aux, mlp_params(r), normal(r, 3, 3),
            normal(r, 3, 2))


def test_per_example_clipped_gradients():
    r = rng_for("pe-clip")
    compare(per_example_grad_norms, mlp_params(r), normal(r, 4, 3), normal(r, 4, 2))


# ---- MAML: grad of (loss after an inner SGD step), vmapped over tasks ----------------------------
def _inner_sgd(ad, loss, p, x, y, lr, steps):
    for _ in range(steps):                                # p' = p - lr ∇L_train(p)
        g = ad.grad(loss)(p, x, y)
        p = tree_util.tree_map(lambda a, b: a - lr * b, p, g)
    return p


def _maml_batch(ad, np_, nn_, loss, p, x_tr, y_tr, x_te, y_te, steps, meta=True):
    def task_loss(p, x_tr, y_tr, x_te, y_te):             # L_test(p - lr ∇L_train(p))
        return loss(_inner_sgd(ad, loss, p, x_tr, y_tr, 0.1, steps), x_te, y_te)

    def meta_loss(p):                                     # mean over the T tasks
        losses = ad.vmap(task_loss, in_axes=(None, 0, 0, 0, 0))(p, x_tr, y_tr, x_te, y_te)
        return np_.mean(losses)
    per_task = ad.vmap(ad.grad(task_loss), in_axes=(None, 0, 0, 0, 0))(
        p, x_tr, y_tr, x_te, y_te)                        # leaves [T, ...]
    return (per_task, ad.value_and_grad(meta_loss)(p)) if meta else per_task


def maml_linear_regression(ad, np_, nn_, p, x_tr, y_tr, x_te, y_te):
    def loss(p, x, y):                                    # x [B, D], y [B]
        return np_.mean((x @ p["w"] + p["b"] - y) ** 2)
    return _maml_batch(ad, np_, nn_, loss, p, x_tr, y_tr, x_te, y_te, steps=1)


def maml_mlp(ad, np_, nn_, p, x_tr, y_tr, x_te, y_te):
    def loss(p, x, y):                                    # x [B, D], y [B, K]
        return np_.mean((mlp(np_, p, x) - y) ** 2)
    return _maml_batch(ad, np_, nn_, loss, p, x_tr, y_tr, x_te, y_te, steps=1)


def maml_mlp_two_inner_steps(ad, np_, nn_, p, x_tr, y_tr, x_te, y_te):
    def loss(p, x, y):
        return np_.mean(np_.sum((mlp(np_, p, x) - y) ** 2, axis=-1))
    return _maml_batch(ad, np_, nn_, loss, p, x_tr, y_tr, x_te, y_te, steps=2, meta=False)


def test_maml_linear_regression():
    r = rng_for("maml-linear")
    p = {"w": normal(r, 3), "b": np.float32(0.1)}
    compare(maml_linear_regression, p, normal(r, 4, 5, 3), normal(r, 4, 5), normal(r, 4, 5, 3),
            normal(r, 4, 5))


def test_maml_mlp():
    r = rng_for("maml-mlp")
    compare(maml_mlp, mlp_params(r), normal(r, 3, 4, 3), normal(r, 3, 4, 2),
            normal(r, 3, 4, 3), normal(r, 3, 4, 2))


def test_maml_mlp_two_inner_steps():
    r = rng_for("maml-mlp-2")
    compare(maml_mlp_two_inner_steps, mlp_params(r, h=4), normal(r, 2, 3, 3),
            normal(r, 2, 3, 2), normal(r, 2, 3, 3), normal(r, 2, 3, 2))


def test_maml_meta_gradient_matches_a_loop_over_tasks():
    r = rng_for("maml-loop")
    p = {"w": normal(r, 3), "b": np.float32(0.1)}
    data = (normal(r, 3, 4, 3), normal(r, 3, 4), normal(r, 3, 4, 3), normal(r, 3, 4))
    per_task, (_, meta_g) = maml_linear_regression(fnad, fnp, fnn, p, *data)
    for t in range(3):                                    # one task at a time, no vmap
        one = maml_linear_regression(fnad, fnp, fnn, p, *(d[t:t + 1] for d in data))[0]
        for k in p:
            np.testing.assert_allclose(per_task[k][t], one[k][0], rtol=1e-5, atol=1e-6)
    for k in p:
        np.testing.assert_allclose(meta_g[k], np.mean(per_task[k], axis=0), rtol=1e-5,
                                   atol=1e-6)


# ---- grad of vmap ----------------------------------------------------------------------------
def grad_of_vmap_mlp(ad, np_, nn_, p, xs, ys):
    def batch_loss(p):
        return np_.mean(ad.vmap(functools.partial(mse_loss, np_, nn_), in_axes=(None, 0, 0))(
            p, xs, ys))
    return ad.grad(batch_loss)(p)


def grad_of_vmap_two_args(ad, np_, nn_, w, xs):           # d/d(w, xs) of Σ_b f(w, x_b)
    f = lambda w, x: np_.sin(w @ x) * np_.sum(x ** 2)     # noqa: E731
    return ad.grad(lambda w, xs: np_.sum(ad.vmap(f, in_axes=(None, 0))(w, xs)),
                   argnums=(0, 1))(w, xs)


def grad_of_vmap_out_axes(ad, np_, nn_, w, xs):           # map axis 1 of xs [D, B]; out [D, B]
    def loss(w):
        ys = ad.vmap(lambda x: np_.tanh(w * x) + x ** 2, in_axes=1, out_axes=-1)(xs)
        return np_.sum(ys * xs)
    return ad.value_and_grad(loss)(w)


def test_grad_of_vmap():
    r = rng_for("grad-vmap")
    compare(grad_of_vmap_mlp, mlp_params(r), normal(r, 4, 3), normal(r, 4, 2))
    compare(grad_of_vmap_two_args, normal(r, 3), normal(r, 5, 3))
    compare(grad_of_vmap_out_axes, normal(r, 2), normal(r, 2, 4))


# ---- vmap of jvp ---------------------------------------------------------------------------
def vmap_of_jvp_tangents(ad, np_, nn_, x, ts):            # J·t for a batch of tangents t
    f = lambda x: np_.stack([np_.sum(np_.sin(x)), np_.prod(x)])   # noqa: E731
    return ad.vmap(lambda t: ad.jvp(f, (x,), (t,)), out_axes=(None, 0))(ts)


def vmap_of_jvp_primals_and_tangents(ad, np_, nn_, p, xs, ts):
    def push(x, t):                                       # along t, at x, with p fixed
        return ad.jvp(lambda x: mlp(np_, p, x), (x,), (t,))
    return ad.vmap(push)(xs, ts)


def vmap_of_jvp_pytree_tangent(ad, np_, nn_, p, x, tps):  # directional derivatives in p
    return ad.vmap(lambda tp: ad.jvp(lambda p: mlp(np_, p, x), (p,), (tp,))[1])(tps)


def test_vmap_of_jvp():
    r = rng_for("vmap-jvp")
    compare(vmap_of_jvp_tangents, normal(r, 3), normal(r, 4, 3))
    p = mlp_params(r)
    compare(vmap_of_jvp_primals_and_tangents, p, normal(r, 4, 3), normal(r, 4, 3))
    tps = {k: normal(r, 3, *v.shape) for k, v in p.items()}
    compare(vmap_of_jvp_pytree_tangent, p, normal(r, 3), tps)


# ---- jvp of grad: Hessian-vector products ------------------------------------------------
def hvp_vector(ad, np_, nn_, x, v):                       # H(x)·v for f = Σ x² sin x + (Σx)³
    f = lambda x: np_.sum(x ** 2 * np_.sin(x)) + np_.sum(x) ** 3   # noqa: E731
    return ad.jvp(ad.grad(f), (x,), (v,))


def hvp_pytree(ad, np_, nn_, p, v, x, y):                 # H_p(loss)·v with v a params tree
    g = ad.grad(lambda p: mse_loss(np_, nn_, p, x, y))
    return ad.jvp(g, (p,), (v,))[1]


def hvp_batched(ad, np_, nn_, x, vs):                     # rows of H by vmap of hvp
    f = lambda x: np_.sum(np_.exp(x) * x[::-1])           # noqa: E731
    return ad.vmap(lambda v: ad.jvp(ad.grad(f), (x,), (v,))[1])(vs)


def test_jvp_of_grad():
    r = rng_for("hvp")
    compare(hvp_vector, normal(r, 4), normal(r, 4))
    p = mlp_params(r)
    compare(hvp_pytree, p, {k: normal(r, *v.shape) for k, v in p.items()}, normal(r, 3),
            normal(r, 2))
    h = compare(hvp_batched, normal(r, 3), np.eye(3, dtype=np.float32))
    np.testing.assert_allclose(h, np.asarray(h).T, rtol=1e-5, atol=1e-6)   # H is symmetric


def test_hvp_matches_hessian_vector_product():
    r = rng_for("hvp-hessian")
    x, v = normal(r, 4), normal(r, 4)
    _, hv = hvp_vector(fnad, fnp, fnn, x, v)
    f = lambda x: fnp.sum(x ** 2 * fnp.sin(x)) + fnp.sum(x) ** 3   # noqa: E731
    np.testing.assert_allclose(hv, np.asarray(fnad.hessian(f)(x)) @ v, rtol=1e-5, atol=1e-5)


# ---- vmap of vmap ---------------------------------------------------------------------------
def vmap_of_vmap_pairwise(ad, np_, nn_, xs, ys):          # [N, D], [M, D] -> [N, M] distances
    dist = lambda x, y: np_.sqrt(np_.sum((x - y) ** 2) + 1e-3)   # noqa: E731
    return ad.vmap(ad.vmap(dist, in_axes=(None, 0)), in_axes=(0, None))(xs, ys)


def vmap_of_vmap_axes(ad, np_, nn_, a, b):                # mapped axes inside, out_axes moved
    f = lambda u, v: np_.tanh(u) * v                      # noqa: E731
    inner = ad.vmap(f, in_axes=(1, None), out_axes=1)
    return ad.vmap(inner, in_axes=(2, 0), out_axes=0)(a, b)


def vmap_of_vmap_of_grad(ad, np_, nn_, p, xs, ys):        # [T, B] per-example grads
    g = ad.grad(functools.partial(mse_loss, np_, nn_))
    return ad.vmap(ad.vmap(g, in_axes=(None, 0, 0)), in_axes=(None, 0, 0))(p, xs, ys)


def test_vmap_of_vmap():
    r = rng_for("vmap-vmap")
    d = compare(vmap_of_vmap_pairwise, normal(r, 3, 2), normal(r, 4, 2))
    assert np.shape(d) == (3, 4)
    compare(vmap_of_vmap_axes, normal(r, 2, 3, 4), normal(r, 4, 2))
    compare(vmap_of_vmap_of_grad, mlp_params(r), normal(r, 2, 3, 3), normal(r, 2, 3, 2))


# ---- linearize inside vmap --------------------------------------------------------------------
def vmap_of_linearize(ad, np_, nn_, xs, ts):
    def lin(x, t):
        y, f_jvp = ad.linearize(lambda x: np_.sin(x) * np_.cumsum(x), x)
        return y, f_jvp(t), f_jvp(2.0 * t)
    return ad.vmap(lin)(xs, ts)


def vmap_of_linearize_params(ad, np_, nn_, p, xs, tps):   # tangent map in p, batched over x
    def lin(x, tp):
        y, f_jvp = ad.linearize(lambda p: mlp(np_, p, x), p)
        return y, f_jvp(tp)
    return ad.vmap(lin, in_axes=(0, None))(xs, tps)


def test_linearize_inside_vmap():
    r = rng_for("vmap-linearize")
    compare(vmap_of_linearize, normal(r, 3, 4), normal(r, 3, 4))
    p = mlp_params(r)
    compare(vmap_of_linearize_params, p, normal(r, 3, 3),
            {k: normal(r, *v.shape) for k, v in p.items()})


# ---- vjp of vmap -------------------------------------------------------------------------------
def vjp_of_vmap(ad, np_, nn_, w, xs, ct):
    f = ad.vmap(lambda w, x: np_.tanh(x @ w) * np_.sum(w), in_axes=(None, 0))
    y, vjp_fn = ad.vjp(f, w, xs)
    return y, vjp_fn(ct)


def vjp_of_vmap_pytree_out(ad, np_, nn_, p, xs, cts):
    f = ad.vmap(lambda x: {"out": mlp(np_, p, x), "norm": np_.sum(x ** 2)})
    y, vjp_fn = ad.vjp(f, xs)
    return y, vjp_fn(cts)


def test_vjp_of_vmap():
    r = rng_for("vjp-vmap")
    compare(vjp_of_vmap, normal(r, 3, 2), normal(r, 4, 3), normal(r, 4, 2))
    compare(vjp_of_vmap_pytree_out, mlp_params(r), normal(r, 5, 3),
            {"out": normal(r, 5, 2), "norm": normal(r, 5)})


# ---- Jacobians with vmap ---------------------------------------------------------------------
def vmap_of_jacrev(ad, np_, nn_, p, xs):                  # per-example Jacobians in x
    return ad.vmap(ad.jacrev(lambda x: mlp(np_, p, x)))(xs)


def vmap_of_hessian(ad, np_, nn_, xs):
    return ad.vmap(ad.hessian(lambda x: np_.sum(np_.sin(x) * x[::-1])))(xs)


def jacfwd_of_vmap(ad, np_, nn_, w, xs):                  # d/dw of the batched outputs
    return ad.jacfwd(lambda w: ad.vmap(lambda x: np_.tanh(w * x))(xs))(w)


def test_jacobians_with_vmap():
    r = rng_for("jac-vmap")
    compare(vmap_of_jacrev, mlp_params(r), normal(r, 3, 3))
    compare(vmap_of_hessian, normal(r, 2, 3))
    compare(jacfwd_of_vmap, normal(r, 2), normal(r, 3, 2))


def test_float64_per_example_and_maml(x64):
    r = rng_for("x64")
    p = {k: v.astype(np.float64) for k, v in mlp_params(r).items()}
    tol = dict(rtol=1e-9, atol=1e-11)
    compare(per_example_mse, p, normal(r, 3, 3, dtype=np.float64),
            normal(r, 3, 2, dtype=np.float64), tol=tol)
    p_lin = {"w": normal(r, 3, dtype=np.float64), "b": np.float64(0.1)}
    compare(maml_linear_regression, p_lin,
            *(normal(r, 2, 3, *d, dtype=np.float64) for d in ((3,), (), (3,), ())), tol=tol)
