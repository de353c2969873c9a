"""checkpoint / remat: same values and gradients as without it (and as jax.checkpoint),
under grad, vjp, jvp, linearize, vmap, nesting and make_jaxpr; and the point of it:
the residuals linearize keeps shrink, as each policy says (checked against jax's own
list of saved residuals)."""
import numpy as np
import pytest

import fnad
import fnad.nn as nn
import fnad.numpy as jnp
from fnad.core import get_aval
from fnad.ir import typecheck_jaxpr
from fnad.remat import checkpoint, checkpoint_name, checkpoint_policies, remat, remat_p

RNG = np.random.default_rng(0)
POLICIES = ["nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
            "everything_saveable"]


def _jax():
    return pytest.importorskip("jax", reason="jax not installed: it is the oracle here")


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def close(a, b, rtol=2e-5, atol=2e-6):
    for x, y in zip(fnad.tree_util.tree_leaves(a), fnad.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)
    assert fnad.tree_util.tree_structure(a) == fnad.tree_util.tree_structure(b)


def residuals(f, *args):
    """The constants of f's linearization: what reverse mode keeps for the backward pass."""
    _, lin = fnad.linearize(f, *args)
    return lin.consts


def nbytes(consts):
    return sum(np.asarray(c).nbytes for c in consts)


def sig(avals):
    """A sorted list of (shape, dtype) to compare residual sets across libraries."""
    return sorted((tuple(a.shape), np.dtype(a.dtype).name) for a in avals)


# ---- models, written once for fnad and for jax ----------------------------------------------
def mlp(np_, W1, W2, x):                       # x [B, I] -> scalar
    h = np_.tanh(x @ W1)                        # [B,I] @ [I,H] -> [B,H]
    return np_.sum(np_.sin(h @ W2))             # [B,H] @ [H,O] -> [B,O]


def sin_chain(np_, x, depth=8):
    for _ in range(depth):
        x = np_.sin(x) * 1.5
    return x


def init_block(T=5, C=8, F=16):
    return {"wq": rand(C, C, scale=0.3), "wk": rand(C, C, scale=0.3),
            "wv": rand(C, C, scale=0.3), "wo": rand(C, C, scale=0.3),
            "w1": rand(C, F, scale=0.3), "w2": rand(F, C, scale=0.3)}


def block(np_, nn_, p, x, H=2):
    """A pre-norm Transformer block with causal softmax attention. x [T, C] -> [T, C]."""
    T, C = x.shape
    D = C // H

    def norm(z):                                 # LayerNorm without scale/shift
        mu = np_.mean(z, axis=-1, keepdims=True)
        return (z - mu) / np_.sqrt(np_.var(z, axis=-1, keepdims=True) + 1e-5)

    h = norm(x)
    q = (h @ p["wq"]).reshape(T, H, D).transpose(1, 0, 2)        # [H, T, D]
    k = (h @ p["wk"]).reshape(T, H, D).transpose(1, 0, 2)        # [H, T, D]
    v = (h @ p["wv"]).reshape(T, H, D).transpose(1, 0, 2)        # [H, T, D]
    att = np_.einsum("htd,hsd->hts", q, k) / np.sqrt(D)           # [H,T,D]@[H,S,D] -> [H,T,S]
    mask = np.tril(np.ones((T, T), bool))
    att = nn_.softmax(np_.where(mask, att, -1e9), axis=-1)
    o = np_.einsum("hts,hsd->htd", att, v).transpose(1, 0, 2).reshape(T, C)   # [T, C]
    x = x + o @ p["wo"]
    return x + nn_.gelu(norm(x) @ p["w1"]) @ p["w2"]             # [T,C]@[C,F]@[F,C]


def stack_loss(np_, nn_, ckpt, params, x):
    for p in params:
        x = ckpt(lambda p, x: block(np_, nn_, p, x))(p, x)
    return np_.mean(x * x)


# ---- values and gradients ------------------------------------------------------------------
def test_eager_values_pytrees_and_kwargs():
    def f(d, *, scale):
        return {"y": jnp.sin(d["a"]) * scale, "z": (d["b"] @ d["b"].T, None)}
    d = {"a": rand(3), "b": rand(2, 4)}
    close(checkpoint(f)(d, scale=2.0), f(d, scale=2.0))
    close(fnad.grad(lambda d: jnp.sum(checkpoint(f)(d, scale=2.0)["y"]))(d),
          fnad.grad(lambda d: jnp.sum(f(d, scale=2.0)["y"]))(d))
    assert remat is checkpoint and fnad.remat is checkpoint and fnad.checkpoint is checkpoint
    assert fnad.checkpoint_policies is checkpoint_policies


@pytest.mark.parametrize("policy", [None] + POLICIES)
def test_mlp_grad_matches_plain_and_jax(policy):
    jax = _jax()
    args = (rand(4, 6), rand(6, 3), rand(5, 4))
    pol = None if policy is None else getattr(checkpoint_policies, policy)
    ours = fnad.grad(checkpoint(lambda *a: mlp(jnp, *a), policy=pol), argnums=(0, 1, 2))(*args)
    close(ours, fnad.grad(lambda *a: mlp(jnp, *a), argnums=(0, 1, 2))(*args))
    jpol = None if policy is None else getattr(jax.checkpoint_policies, policy)
    theirs = jax.grad(jax.checkpoint(lambda *a: mlp(jax.numpy, *a), policy=jpol),
                      argnums=(0, 1, 2))(*args)
    close(ours, tuple(theirs), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("policy", [None, "dots_saveable", "everything_saveable"])
def test_transformer_stack_per_block_checkpoint(policy):
    jax = _jax()
    params = [init_block() for _ in range(3)]
    x = rand(5, 8)
    pol = None if policy is None else getattr(checkpoint_policies, policy)
    ck = lambda f: checkpoint(f, policy=pol)
    loss, g = fnad.value_and_grad(lambda ps: stack_loss(jnp, nn, ck, ps, x))(params)
    loss0, g0 = fnad.value_and_grad(lambda ps: stack_loss(jnp, nn, lambda f: f, ps, x))(params)
    close(loss, loss0)
    close(g, g0, rtol=1e-5, atol=1e-6)
    jpol = None if policy is None else getattr(jax.checkpoint_policies, policy)
    jck = lambda f: jax.checkpoint(f, policy=jpol)
    jloss, jg = jax.value_and_grad(
        lambda ps: stack_loss(jax.numpy, jax.nn, jck, ps, x))(params)
    close(loss, jloss, rtol=1e-4)
    close(g, jg, rtol=1e-3, atol=1e-5)


def test_jvp_and_linearize_match_plain():
    x, t = rand(6), rand(6)
    f = lambda x: sin_chain(jnp, x)
    y, y_dot = fnad.jvp(checkpoint(f), (x,), (t,))
    y0, y0_dot = fnad.jvp(f, (x,), (t,))
    close((y, y_dot), (y0, y0_dot))
    y1, f_lin = fnad.linearize(checkpoint(f), x)
    close((y1, f_lin(t)), (y0, y0_dot))


def test_vjp_with_several_outputs_and_unused_input():
    def f(x, y, unused):
        return jnp.sin(x) * y, jnp.exp(x).sum()
    args = (rand(4), rand(4), rand(2))
    out, vjp_fn = fnad.vjp(checkpoint(f), *args)
    out0, vjp0 = fnad.vjp(f, *args)
    close(out, out0)
    ct = (rand(4), np.float32(0.7))
    close(vjp_fn(ct), vjp0(ct))


def test_closed_over_values_are_differentiated():
    x, y = rand(5), rand(5)

    def g(y):
        return jnp.sum(checkpoint(lambda x: jnp.sin(x * y) * y)(x))  # y is closed over
    close(fnad.grad(g)(y), fnad.grad(lambda y: jnp.sum(jnp.sin(x * y) * y))(y))


def test_integer_operands():
    def f(x, n):
        return jnp.sum(jnp.sin(x) * n.astype(np.float32) + n)
    x, n = rand(4), np.arange(4, dtype=np.int32)
    close(fnad.grad(checkpoint(f))(x, n), fnad.grad(f)(x, n))


def test_nested_checkpoint():
    jax = _jax()

    def f(np_, ck, x):
        inner = ck(lambda z: np_.sin(np_.cos(z) * z))
        return np_.sum(ck(lambda z: np_.tanh(inner(z) @ inner(z).T))(x))
    x = rand(3, 4)
    ours = fnad.grad(lambda x: f(jnp, checkpoint, x))(x)
    close(ours, fnad.grad(lambda x: f(jnp, lambda g: g, x))(x))
    close(ours, jax.grad(lambda x: f(jax.numpy, jax.checkpoint, x))(x), rtol=1e-4)
    # Mixed policies on the two levels.
    ck = lambda g: checkpoint(g, policy=checkpoint_policies.dots_saveable)
    close(fnad.grad(lambda x: f(jnp, ck, x))(x), ours, rtol=1e-5)


def test_grad_of_grad_through_checkpoint():
    jax = _jax()
    f = lambda np_, ck: ck(lambda x: np_.sum(np_.sin(x) ** 2 * np_.exp(-x)))
    x = rand(4)
    ours = fnad.grad(lambda x: jnp.sum(fnad.grad(f(jnp, checkpoint))(x) ** 2))(x)
    plain = fnad.grad(lambda x: jnp.sum(fnad.grad(f(jnp, lambda g: g))(x) ** 2))(x)
    theirs = jax.grad(lambda x: jax.numpy.sum(
        jax.grad(f(jax.numpy, jax.checkpoint))(x) ** 2))(x)
    close(ours, plain)
    close(ours, theirs, rtol=1e-4, atol=1e-5)
    third = fnad.grad(fnad.grad(fnad.grad(checkpoint(lambda x: jnp.sin(x) * x))))(1.0)
    np.testing.assert_allclose(third, -3 * np.sin(1.0) - np.cos(1.0), rtol=1e-5)


def test_checkpoint_under_vmap():
    xs = rand(3, 5)
    f = lambda x: jnp.sum(sin_chain(jnp, x, 4))
    close(fnad.vmap(checkpoint(f))(xs), fnad.vmap(f)(xs))
    close(fnad.vmap(fnad.grad(checkpoint(f)))(xs), fnad.vmap(fnad.grad(f))(xs))
    close(fnad.grad(lambda xs: jnp.sum(fnad.vmap(checkpoint(f))(xs)))(xs),
          fnad.grad(lambda xs: jnp.sum(fnad.vmap(f)(xs)))(xs))


def test_vmap_under_checkpoint():
    W, xs = rand(5, 5), rand(3, 5)
    f = lambda W, xs: jnp.sum(fnad.vmap(lambda x: jnp.tanh(W @ x))(xs) ** 2)
    close(fnad.grad(checkpoint(f), argnums=(0, 1))(W, xs), fnad.grad(f, argnums=(0, 1))(W, xs))


def test_vmap_of_vjp_function():
    """The backward pass itself under vmap: rows of the Jacobian by batched cotangents."""
    f = lambda x: jnp.tanh(jnp.outer(x, x)).sum(axis=0)
    x = rand(4)
    _, vjp_fn = fnad.vjp(checkpoint(f), x)
    _, vjp0 = fnad.vjp(f, x)
    cts = np.eye(4, dtype=np.float32)
    close(fnad.vmap(vjp_fn)(cts), fnad.vmap(vjp0)(cts))


def test_jacobians_and_hessian_match_plain():
    f = lambda x: jnp.sum(jnp.tanh(jnp.outer(x, x)) ** 2 @ x)
    g = lambda x: jnp.sin(jnp.outer(x, x)).sum(0)
    x = rand(3)
    for pol in [None] + POLICIES:
        ck = checkpoint(f, policy=None if pol is None else getattr(checkpoint_policies, pol))
        close(fnad.hessian(ck)(x), fnad.hessian(f)(x), rtol=1e-5, atol=1e-5)
    close(fnad.jacfwd(checkpoint(g))(x), fnad.jacfwd(g)(x))
    close(fnad.jacrev(checkpoint(g))(x), fnad.jacrev(g)(x))
    _, f_lin = fnad.linearize(checkpoint(g), x)                # the linear map under vmap
    close(fnad.vmap(f_lin, out_axes=1)(np.eye(3, dtype=np.float32)), fnad.jacfwd(g)(x))


def test_effects_are_replayed_with_the_recompute_as_in_jax():
    jax = _jax()

    def run(ours: bool):
        calls = []
        cb = fnad.debug.callback if ours else jax.debug.callback
        np_, ck, grad = (jnp, checkpoint, fnad.grad) if ours else \
            (jax.numpy, jax.checkpoint, jax.grad)

        def f(x):
            cb(lambda v: calls.append(float(v)), x)
            return np_.sin(x)
        grad(ck(f))(1.0)
        once = len(calls)
        grad(ck(lambda x: ck(f)(x) * 2.0))(1.0)
        return once, len(calls) - once
    assert run(True) == run(False) == (2, 3)    # forward, then again in the backward pass


def test_static_argnums():
    calls = []

    def f(x, n, act):
        calls.append(n)
        for _ in range(n):                       # n is a Python int: loops are unrolled
            x = getattr(jnp, act)(x)
        return jnp.sum(x)
    x = rand(4)
    g = fnad.grad(checkpoint(f, static_argnums=(1, 2)))(x, 3, "sin")
    close(g, fnad.grad(f)(x, 3, "sin"))
    assert fnad.grad(checkpoint(f, static_argnums=(-2, -1)))(x, 2, "tanh").shape == (4,)
    assert set(calls) == {2, 3}


def test_errors():
    from checks import raises_with
    raises_with(lambda: checkpoint(jnp.sin, policy="dots"), "policy", "callable",
                exc=TypeError)
    raises_with(lambda: checkpoint(jnp.sin, static_argnums=("x",)), "static_argnums",
                exc=TypeError)
    f = checkpoint(lambda x, n: x * n, static_argnums=2)
    raises_with(lambda: fnad.grad(f)(1.0, 2), "static_argnums", "range(-2, 2)",
                exc=ValueError)
    g = checkpoint(lambda x, act: x)
    raises_with(lambda: fnad.grad(g)(1.0, "sin"), "'sin'", "static_argnums", exc=TypeError)


# ---- the point: fewer residuals ----------------------------------------------------------
def test_residuals_shrink_for_a_deep_chain():
    x = rand(64)
    depth = 8
    plain = residuals(lambda x: sin_chain(jnp, x, depth), x)
    ckpt = residuals(checkpoint(lambda x: sin_chain(jnp, x, depth)), x)
    # Without checkpoint: cos of each layer's input; with it: only the input itself.
    assert len(plain) == depth and nbytes(plain) == depth * x.nbytes
    assert len(ckpt) == 1 and np.array_equal(np.asarray(ckpt[0]), x)
    every = residuals(checkpoint(lambda x: sin_chain(jnp, x, depth),
                                 policy=checkpoint_policies.everything_saveable), x)
    assert len(every) == depth                # the cosines (x itself is no longer read)
    close(fnad.linearize(checkpoint(lambda x: sin_chain(jnp, x, depth)), x)[1](x),
          fnad.linearize(lambda x: sin_chain(jnp, x, depth), x)[1](x))


def test_policies_order_residuals():
    args = (rand(4, 6), rand(6, 3), rand(5, 4))
    f = lambda *a: mlp(jnp, *a)
    count = {}
    for name in POLICIES:
        consts = residuals(checkpoint(f, policy=getattr(checkpoint_policies, name)), *args)
        count[name] = (len(consts), nbytes(consts))
    assert count["nothing_saveable"] < count["dots_saveable"] < count["everything_saveable"]
    assert count["nothing_saveable"] == (3, sum(a.nbytes for a in args))
    assert count["dots_with_no_batch_dims_saveable"] == count["dots_saveable"]  # 2-D dots


@pytest.mark.parametrize("policy", [None] + POLICIES)
def test_saved_residuals_match_jax(policy):
    jax = _jax()
    ad_checkpoint = pytest.importorskip("jax._src.ad_checkpoint",
                                        reason="jax's saved_residuals lives here")
    if not hasattr(ad_checkpoint, "saved_residuals"):
        pytest.skip("this jax has no saved_residuals to compare with")

    def f(np_, W1, W2, x):                      # batched dots, where the two dot policies differ
        h = np_.tanh(np_.einsum("bij,bjk->bik", x, W1))
        return np_.sum(np_.sin(h @ W2))
    args = (rand(2, 4, 6), rand(6, 3), rand(2, 5, 4))
    pol = None if policy is None else getattr(checkpoint_policies, policy)
    ours = residuals(checkpoint(lambda *a: f(jnp, *a), policy=pol), *args)
    jpol = None if policy is None else getattr(jax.checkpoint_policies, policy)
    theirs = ad_checkpoint.saved_residuals(
        jax.checkpoint(lambda *a: f(jax.numpy, *a), policy=jpol), *args)
    assert sig(get_aval(c) for c in ours) == sig(a for a, _ in theirs)


def test_checkpoint_name_policies():
    jax = _jax()
    from jax.ad_checkpoint import checkpoint_name as jname

    def f(np_, name, W, V, x):
        h = name(np_.tanh(x @ W), "h")                     # [B,I]@[I,H] -> [B,H]
        g = name(np_.sin(h) * 2.0, "g")                    # [B, H]
        return np_.sum(np_.cos(g @ V))                     # [B,H]@[H,H] -> [B,H]
    W, V, x = rand(5, 4), rand(4, 4), rand(3, 5)
    h = np.tanh(x @ W)
    expect_saved = {"save_only_these_names": h, "save_any_names_but_these": np.sin(h) * 2}
    for pol, value in expect_saved.items():
        ck = checkpoint(lambda W, V, x: f(jnp, checkpoint_name, W, V, x),
                        policy=getattr(checkpoint_policies, pol)("h"))
        jck = jax.checkpoint(lambda W, V, x: f(jax.numpy, jname, W, V, x),
                             policy=getattr(jax.checkpoint_policies, pol)("h"))
        g = fnad.grad(ck, argnums=(0, 1, 2))(W, V, x)
        close(g, jax.grad(jck, argnums=(0, 1, 2))(W, V, x), rtol=1e-4, atol=1e-5)
        close(g, fnad.grad(lambda W, V, x: f(jnp, checkpoint_name, W, V, x),
                           argnums=(0, 1, 2))(W, V, x))
        saved = [c for c in residuals(ck, W, V, x) if get_aval(c).shape == (3, 4)]
        assert len(saved) == 1
        np.testing.assert_allclose(np.asarray(saved[0]), value, rtol=1e-5, atol=1e-6)
    close(checkpoint_name({"a": x}, "x"), {"a": x})
    assert "name[name='h']" in str(fnad.make_jaxpr(lambda x: checkpoint_name(x, "h"))(x))


def test_per_block_checkpoint_keeps_only_block_inputs():
    params = [init_block() for _ in range(4)]
    x = rand(5, 8)
    plain = residuals(lambda ps: stack_loss(jnp, nn, lambda f: f, ps, x), params)
    ckpt = residuals(lambda ps: stack_loss(jnp, nn, checkpoint, ps, x), params)
    param_ids = {id(w) for p in params for w in p.values()}
    acts = [c for c in ckpt if id(c) not in param_ids and get_aval(c).dtype != np.bool_]
    # Per block: its input activation; plus what mean(x*x) keeps: no attention maps.
    assert all(get_aval(c).shape in {(5, 8), ()} for c in acts), [get_aval(c) for c in acts]
    assert len(acts) <= len(params) + 2
    assert nbytes(ckpt) < nbytes(plain) / 2
    assert any(get_aval(c).shape == (2, 5, 5) for c in plain)    # attention probabilities


# ---- the staged program ------------------------------------------------------------------
def test_make_jaxpr_shows_checkpoint_and_recompute():
    f = lambda x: jnp.sum(checkpoint(lambda x: sin_chain(jnp, x, 3),
                                     policy=checkpoint_policies.dots_saveable)(x))
    x = rand(4)
    closed = fnad.make_jaxpr(f)(x)
    typecheck_jaxpr(closed.jaxpr)
    (eqn,) = [e for e in closed.eqns if e.primitive is remat_p]
    assert [e.primitive.name for e in eqn.params["jaxpr"].eqns].count("sin") == 3
    assert eqn.params["policy"] is checkpoint_policies.dots_saveable
    assert eqn.params["prevent_cse"] is True
    text = str(closed)
    assert "checkpoint[" in text and "policy=dots_saveable" in text

    grad_jaxpr = fnad.make_jaxpr(fnad.grad(f))(x)
    typecheck_jaxpr(grad_jaxpr.jaxpr)
    outer_sins = [e for e in grad_jaxpr.eqns if e.primitive.name == "sin"]
    (bwd,) = [e for e in grad_jaxpr.eqns if e.primitive is remat_p]
    inner = [e.primitive.name for e in bwd.params["jaxpr"].eqns]
    assert len(outer_sins) == 3                 # the forward pass
    assert inner.count("sin") == 2 and inner.count("cos") == 3   # recomputed in backward
    plain = fnad.make_jaxpr(fnad.grad(lambda x: jnp.sum(sin_chain(jnp, x, 3))))(x)
    assert not any(e.primitive is remat_p for e in plain.eqns)


def test_make_jaxpr_of_higher_order_and_batched_typechecks():
    f = checkpoint(lambda x: jnp.sum(jnp.tanh(x) ** 3))
    x = rand(3)
    gg = fnad.grad(lambda x: jnp.sum(fnad.grad(f)(x) * x))
    for g in (gg, fnad.vmap(fnad.grad(f)), lambda x: fnad.jvp(f, (x,), (x,))[1]):
        closed = fnad.make_jaxpr(g)(x)
        typecheck_jaxpr(closed.jaxpr)
        assert any(e.primitive is remat_p for e in closed.eqns)
    from fnad.ir import eval_jaxpr
    closed = fnad.make_jaxpr(gg)(x)
    plain = lambda x: jnp.sum(jnp.tanh(x) ** 3)
    close(eval_jaxpr(closed.jaxpr, closed.consts, x)[0],
          fnad.grad(lambda x: jnp.sum(fnad.grad(plain)(x) * x))(x))
