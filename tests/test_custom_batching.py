"""fnad.custom_batching (custom_vmap, sequential_vmap) against jax.custom_batching: the
rule is used under vmap (rules that compute something other than the function, as JAX's
own tests do), in_batched contents, unbatched outputs, nested vmap, axis names and
collectives, derivatives both ways (JAX has forward mode only: reverse mode is checked
against JAX's forward mode), jit on each backend, sequential_vmap against a Python loop,
and the errors."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import custom_batching as jcb

import fnad
import fnad.numpy as fnp
from fnad import custom_batching as fcb
from fnad import lax

jax.config.update("jax_enable_x64", False)

RTOL = 1e-5


def _libs(lib):
    if lib == "jax":
        return jax, jnp, jcb, jax.lax
    return fnad, fnp, fcb, lax


def _close(a, b, rtol=RTOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-6)


def _sin_with_cos_rule(lib, log=None):
    """sin, whose vmap rule computes cos instead (so the rule's use shows)."""
    _, np_, cb, _ = _libs(lib)

    @cb.custom_vmap
    def f(x):
        return np_.sin(x)

    @f.def_vmap
    def rule(axis_size, in_batched, x):
        if log is not None:
            log.append((axis_size, in_batched, tuple(x.shape)))
        return np_.cos(x), in_batched[0]
    return f


def _add_with_mul_rule(lib, log=None):
    _, np_, cb, _ = _libs(lib)

    @cb.custom_vmap
    def f(x, y):
        return x + y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        if log is not None:
            log.append((axis_size, list(in_batched)))
        return xs * ys, any(in_batched)
    return f


X = np.linspace(-1.0, 2.0, 5, dtype=np.float32)
Y = np.linspace(0.5, 1.5, 5, dtype=np.float32)
M = np.arange(12, dtype=np.float32).reshape(3, 4) / 7


def test_outside_vmap_the_function_runs():
    for lib in ("fnad", "jax"):
        tr, *_ = _libs(lib)
        f = _sin_with_cos_rule(lib)
        _close(f(0.3), np.sin(0.3))
        _close(tr.jit(f)(X), np.sin(X))
    g = _add_with_mul_rule("fnad")
    _close(g(X, Y), X + Y)
    _close(g(x=X, y=Y), X + Y)                      # keyword arguments resolve


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0), (1, 0)])
def test_the_rule_is_used_and_sees_in_batched(in_axes):
    x = {0: M.T, 1: M, None: M[:, 0]}[in_axes[0]]           # members of shape (3,)
    y = {0: M.T + 1, None: M[:, 1]}[in_axes[1]]
    res = {}
    for lib in ("fnad", "jax"):
        tr, *_ = _libs(lib)
        log: list = []
        f = _add_with_mul_rule(lib, log)
        res[lib] = (tr.vmap(f, in_axes=in_axes)(x, y), log)
    _close(res["fnad"][0], res["jax"][0])
    assert res["fnad"][1] == res["jax"][1]
    assert res["fnad"][1] == [(4, [in_axes[0] is not None, in_axes[1] is not None])]
    xs = x if in_axes[0] is None else np.moveaxis(x, in_axes[0], 0)
    _close(res["fnad"][0], np.broadcast_to(xs * y, (4, 3)))    # the rule's product


def test_in_batched_is_a_pytree_like_the_arguments():
    seen = {}
    for lib in ("fnad", "jax"):
        tr, np_, cb, _ = _libs(lib)

        @cb.custom_vmap
        def f(d, t):
            return d["a"] * t[0] + d["b"] - t[1]

        @f.def_vmap
        def rule(axis_size, in_batched, d, t):
            seen[lib] = in_batched
            return d["a"] * t[0] + d["b"] - t[1] + 100.0, True

        out = tr.vmap(f, in_axes=({"a": 0, "b": None}, (None, 0)))(
            {"a": X, "b": np.float32(1.0)}, (np.float32(2.0), Y))
        seen[lib + "_out"] = np.asarray(out)
    assert seen["fnad"] == seen["jax"] == [{"a": True, "b": False}, (False, True)]
    assert isinstance(seen["fnad"], list)
    _close(seen["fnad_out"], seen["jax_out"])
    _close(seen["fnad_out"], X * 2 + 1 - Y + 100)


def _total_rule(lib):
    """An output the rule says is unbatched: the sum over the whole batch."""
    _, np_, cb, _ = _libs(lib)

    @cb.custom_vmap
    def f(x):
        return np_.sin(x), np_.sum(x)

    @f.def_vmap
    def rule(axis_size, in_batched, xs):
        return (np_.sin(xs), np_.sum(xs)), (True, False)
    return f


def test_unbatched_outputs_come_back_unbatched():
    res = {}
    for lib in ("fnad", "jax"):
        tr, *_ = _libs(lib)
        f = _total_rule(lib)
        res[lib] = tr.vmap(f, out_axes=(0, None))(M)     # out_axes=None needs it unbatched
    for a, b in zip(res["fnad"], res["jax"]):
        _close(a, b)
    assert np.shape(res["fnad"][1]) == ()
    _close(res["fnad"][1], M.sum())
    # broadcast where the output is asked batched
    s = fnad.vmap(_total_rule("fnad"))(M)[1]
    _close(s, np.full(3, M.sum()))


def test_nested_vmap_runs_the_rule_at_each_level():
    res = {}
    for lib in ("fnad", "jax"):
        tr, np_, cb, _ = _libs(lib)
        log: list = []

        @cb.custom_vmap
        def g(x):
            return np_.sin(x)

        @g.def_vmap
        def rule(axis_size, in_batched, x):
            log.append((axis_size, in_batched, tuple(x.shape)))
            return np_.sum(x) + np_.zeros(x.shape[1:], x.dtype), False

        res[lib] = (tr.vmap(tr.vmap(g))(M), tr.vmap(tr.vmap(g), in_axes=1)(M), log)
    _close(res["fnad"][0], res["jax"][0])
    _close(res["fnad"][1], res["jax"][1])
    # the inner vmap runs the rule (inside the outer one, the batch is (4,) per row); the
    # outer one batches the rule's operations
    assert res["fnad"][2] == res["jax"][2] == [(4, [True], (4,)), (3, [True], (3,))]


def test_axis_name_and_collectives():
    res = {}
    for lib in ("jax", "fnad"):               # f ends as fnad's
        tr, np_, cb, lx = _libs(lib)

        @cb.custom_vmap
        def f(x):
            return np_.sin(x)

        @f.def_vmap
        def rule(axis_size, in_batched, x):       # psum of an unmapped value: n·x
            return lx.psum(x, "i") * 2.0, in_batched[0]

        @cb.custom_vmap
        def g(x):
            return np_.sin(x)

        @g.def_vmap
        def rule_g(axis_size, in_batched, x):
            return np_.cos(x), True

        res[lib] = (tr.vmap(f, axis_name="i")(X),
                    tr.vmap(lambda x: lx.psum(g(x), "i"), axis_name="i")(X))
    for a, b in zip(res["fnad"], res["jax"]):
        _close(a, b)
    _close(res["fnad"][0], 10 * X)
    _close(res["fnad"][1], np.full(5, np.cos(X).sum()))
    # nested names: the inner ("i") vmap runs the rule, its psum over "i" sees an unmapped
    # value (4·x), the rule's operations are batched over "j" (JAX fails here: an internal
    # assertion). out[j, i] = Σ_j' 8·M[j', i] + Σ_i' M[j, i'].
    out = fnad.vmap(fnad.vmap(lambda x: lax.psum(f(x), "j") + lax.psum(x, "i"),
                              axis_name="i"), axis_name="j")(M)
    _close(out, 8 * M.sum(0)[None, :] + M.sum(1)[:, None])


# ---- derivatives ----------------------------------------------------------------------------
def test_jvp_outside_vmap_is_the_functions():
    for lib in ("fnad", "jax"):
        tr, *_ = _libs(lib)
        f = _sin_with_cos_rule(lib)
        p, t = tr.jvp(f, (X,), (Y,))
        _close(p, np.sin(X))
        _close(t, np.cos(X) * Y)
        _close(tr.grad(lambda x: f(x).sum())(X) if lib == "fnad" else np.cos(X), np.cos(X))
    eps = 1e-3                                      # central differences
    f = _sin_with_cos_rule("fnad")
    fd = (f(X.astype(np.float64) + eps * Y) - f(X.astype(np.float64) - eps * Y)) / (2 * eps)
    _close(fnad.jvp(f, (X,), (Y,))[1], fd, rtol=1e-3)


@pytest.mark.parametrize("batched", ["both", "primal"])
def test_vmap_of_jvp_matches_jax(batched):
    in_axes = (0, 0) if batched == "both" else (0, None)
    y = Y if batched == "both" else np.float32(0.7)
    res = {}
    for lib in ("fnad", "jax"):
        tr, *_ = _libs(lib)
        f = _sin_with_cos_rule(lib)
        res[lib] = tr.vmap(lambda x, t: tr.jvp(f, (x,), (t,)), in_axes=in_axes)(X, y)
    for a, b in zip(res["fnad"], res["jax"]):
        _close(a, b)
    _close(res["fnad"][1], -np.sin(X) * y)          # the rule's (cos) derivative


def test_vmap_of_jvp_with_only_the_tangent_batched():
    """The tangent goes through the rule, as in JAX; the primal output, not being batched,
    is the function's (JAX runs the rule there too: see docs/differences_from_jax.md)."""
    res = {}
    for lib in ("fnad", "jax"):
        tr, *_ = _libs(lib)
        f = _sin_with_cos_rule(lib)
        res[lib] = tr.vmap(lambda t: tr.jvp(f, (np.float32(0.4),), (t,)))(Y)
    _close(res["fnad"][1], res["jax"][1])
    _close(res["fnad"][1], -np.sin(0.4) * Y)
    _close(res["fnad"][0], np.full(5, np.sin(0.4)))


def test_gradients_both_ways_use_the_rule():
    """vmap(grad f) and grad(vmap f): JAX cannot reverse-differentiate custom_vmap, so
    these are checked against its forward mode (vmap(jacfwd f), jacfwd(vmap f))."""
    f = _sin_with_cos_rule("fnad")
    jf = _sin_with_cos_rule("jax")
    want_vg = jax.vmap(jax.jacfwd(jf))(X)
    _close(fnad.vmap(fnad.grad(f))(X), want_vg)
    _close(fnad.vmap(fnad.jacfwd(f))(X), want_vg)
    _close(want_vg, -np.sin(X))
    _close(fnad.grad(lambda x: fnad.vmap(f)(x).sum())(X), jax.jacfwd(jax.vmap(jf))(X).sum(0))
    _close(fnad.jacrev(fnad.vmap(f))(X), jax.jacfwd(jax.vmap(jf))(X))
    # second order
    want2 = jax.vmap(jax.jacfwd(jax.jacfwd(jf)))(X)
    _close(fnad.vmap(fnad.grad(fnad.grad(f)))(X), want2)
    _close(fnad.vmap(fnad.hessian(f))(X), want2)
    # two arguments, one unbatched: its cotangent sums over the batch
    g = _add_with_mul_rule("fnad")
    jg = _add_with_mul_rule("jax")
    gx, gy = fnad.grad(lambda x, y: fnad.vmap(g, in_axes=(0, None))(x, y).sum(),
                       argnums=(0, 1))(X, np.float32(3.0))
    _close(gx, np.full(5, 3.0))
    _close(gy, X.sum())
    want = jax.vmap(jax.jacfwd(jg, argnums=(0, 1)), in_axes=(0, None))(X, np.float32(3.0))
    got = fnad.vmap(fnad.grad(g, argnums=(0, 1)), in_axes=(0, None))(X, np.float32(3.0))
    for a, b in zip(got, want):
        _close(a, b)
    _close(got[0], np.full(5, 3.0))
    _close(got[1], X)


def test_linearize_and_vjp_under_vmap():
    f = _sin_with_cos_rule("fnad")
    out, f_jvp = fnad.linearize(fnad.vmap(f), X)
    _close(out, np.cos(X))
    _close(f_jvp(Y), -np.sin(X) * Y)
    out, f_vjp = fnad.vjp(fnad.vmap(f), X)
    _close(f_vjp(Y)[0], -np.sin(X) * Y)
    _close(fnad.vmap(lambda x, ct: fnad.vjp(f, x)[1](ct)[0])(X, Y), -np.sin(X) * Y)


def test_mixed_batching_of_primals_and_tangents():
    """x and ẋ batched, y batched with an unbatched ẏ: the rule sees everything batched
    and the tangent has one batch axis (JAX gives a [5, 5] tangent here: its rule is
    called on the mutually batched arguments and vmapped again over y)."""
    g = _add_with_mul_rule("fnad")
    p, t = fnad.vmap(lambda x, tx, y: fnad.jvp(g, (x, y), (tx, np.float32(1.0))))(X, Y, Y)
    _close(p, X * Y)
    _close(t, [tx * y + x for x, tx, y in zip(X, Y, Y)])   # d(x·y) = ẋ·y + x·ẏ per member
    jg = _add_with_mul_rule("jax")
    jt = jax.vmap(lambda x, tx, y: jax.jvp(jg, (x, y), (tx, np.float32(1.0))))(X, Y, Y)[1]
    assert jt.shape == (5, 5)


def test_transpose_dot_product_under_vmap():
    """<ȳ, J ẋ> = <Jᵀ ȳ, ẋ> member by member, J from the rule (x·y) on both sides."""
    g = _add_with_mul_rule("fnad")
    tx, ty, ct = Y[::-1].copy(), X + 3, Y * 2

    def both(x, y, tx, ty, ct):
        _, lin = fnad.linearize(g, x, y)
        _, back = fnad.vjp(g, x, y)
        bx, by = back(ct)
        return ct * lin(tx, ty), bx * tx + by * ty
    lhs, rhs = fnad.vmap(both, in_axes=(0, None, 0, 0, 0))(X, np.float32(0.5), tx, ty, ct)
    _close(lhs, rhs)
    _close(lhs, ct * (tx * 0.5 + X * ty))


def test_reachable_as_fnad_custom_batching():
    assert fnad.custom_batching.custom_vmap is fcb.custom_vmap
    assert fnad.custom_batching.sequential_vmap is fcb.sequential_vmap


# ---- jit ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "numba", "xla"])
def test_under_jit_on_each_backend(backend):
    f = _sin_with_cos_rule("fnad")
    _close(fnad.jit(f, backend=backend)(X), np.sin(X))
    _close(fnad.jit(fnad.vmap(f), backend=backend)(X), np.cos(X))
    _close(fnad.vmap(fnad.jit(f, backend=backend))(X), np.cos(X))
    _close(fnad.jit(fnad.grad(f), backend=backend)(np.float32(0.3)), np.cos(0.3))
    _close(fnad.jit(fnad.vmap(fnad.grad(f)), backend=backend)(X), -np.sin(X))
    _close(fnad.vmap(fnad.jit(fnad.grad(f), backend=backend))(X), -np.sin(X))
    _close(fnad.vmap(fnad.grad(fnad.jit(f, backend=backend)))(X), -np.sin(X))
    _close(fnad.vmap(fnad.grad(fnad.grad(fnad.jit(f, backend=backend))))(X), -np.cos(X))
    _close(fnad.jit(fnad.grad(lambda x: fnad.vmap(f)(x).sum()), backend=backend)(X),
           -np.sin(X))
    t = _total_rule("fnad")
    a, s = fnad.jit(fnad.vmap(t, out_axes=(0, None)), backend=backend)(M)
    _close(a, np.sin(M))
    _close(s, M.sum())


# ---- sequential_vmap -------------------------------------------------------------------------
def test_sequential_vmap_matches_a_python_loop_and_jax():
    def body(lib):
        _, np_, *_ = _libs(lib)
        return lambda x, p: {"s": np_.sum(x * p["w"]) + p["b"], "x": x * 2}

    f = fcb.sequential_vmap(body("fnad"))
    jf = jcb.sequential_vmap(body("jax"))
    p = {"w": np.float32(1.5), "b": np.float32(0.25)}
    got = fnad.vmap(f, in_axes=(0, None))(M, p)
    want = [body("fnad")(m, p) for m in M]
    _close(got["s"], [w["s"] for w in want])
    _close(got["x"], [w["x"] for w in want])
    jwant = jax.vmap(jf, in_axes=(0, None))(M, p)
    _close(got["s"], jwant["s"])
    # batched parameters too, and it really loops (a scan in the jaxpr)
    ps = {"w": Y[:3], "b": Y[2:]}
    got = fnad.vmap(f)(M, ps)
    _close(got["s"], [body("fnad")(m, {"w": w, "b": b})["s"] for m, w, b in zip(M, Y[:3],
                                                                              Y[2:])])
    jaxpr = fnad.make_jaxpr(fnad.vmap(f, in_axes=(0, None)))(M, p)
    assert any(e.primitive.name == "scan" for e in jaxpr.jaxpr.eqns)
    _close(fnad.jit(fnad.vmap(f, in_axes=(0, None)), backend="numba")(M, p)["x"], 2 * M)
    # gradient through the loop
    g = fnad.grad(lambda m: fnad.vmap(f, in_axes=(0, None))(m, p)["s"].sum())(M)
    _close(g, np.full(M.shape, 1.5))


# ---- errors ---------------------------------------------------------------------------------
def _with_rule(rule, fun=None):
    f = fcb.custom_vmap(fun or (lambda x: fnp.sin(x)))
    f.def_vmap(rule)
    return f


def test_errors():
    f = fcb.custom_vmap(lambda x: x)
    with pytest.raises(AttributeError, match="No batching rule defined"):
        f(1.0)
    with pytest.raises(ValueError, match="different structures"):
        fnad.vmap(_with_rule(lambda n, b, x: (x, (True, True))))(X)
    with pytest.raises(ValueError, match="returns f32"):
        fnad.vmap(_with_rule(lambda n, b, x: ((x, x), (True, True))))(X)
    with pytest.raises(TypeError, match="must have type f32\\[\\]"):
        fnad.vmap(_with_rule(lambda n, b, x: (x, False)))(X)
    with pytest.raises(TypeError, match="must have type f32\\[5\\]"):
        fnad.vmap(_with_rule(lambda n, b, x: (x[0], True)))(X)
    with pytest.raises(TypeError, match="must be a bool"):
        fnad.vmap(_with_rule(lambda n, b, x: (x, 1)))(X)
    with pytest.raises(TypeError, match="must return a pair"):
        fnad.vmap(_with_rule(lambda n, b, x: x))(X)

    def closes_over(y):
        g = _with_rule(lambda n, b, x: (x, b[0]), lambda x: x * y)
        return g(2.0)
    with pytest.raises(ValueError, match="closes over a value that is batched"):
        fnad.vmap(closes_over)(X)
    with pytest.raises(ValueError, match="closes over a value that is batched"):
        fnad.vmap(fnad.grad(closes_over))(X)
    _close(fnad.grad(closes_over)(np.float32(3.0)), 2.0)   # outside vmap: the function's

    def closes_over_differentiated(x, y):
        g = _with_rule(lambda n, b, x: (x, b[0]), lambda x: x * y)
        return g(x)
    with pytest.raises(ValueError, match="differentiated"):
        fnad.vmap(lambda x, t: fnad.jvp(lambda y: closes_over_differentiated(x, y),
                                        (np.float32(1.0),), (t,)))(X, Y)

    r = _with_rule(lambda n, b, x: (lax.axis_index("i") * x, True))
    with pytest.raises(ValueError, match="varies along the axis 'i'"):
        fnad.vmap(r, axis_name="i")(X)
    with pytest.raises(TypeError, match="could not be resolved"):
        _add_with_mul_rule("fnad")(X, z=Y)


def test_jax_raises_for_a_batched_closure_too():
    def closes_over(y):
        g = jcb.custom_vmap(lambda x: x * y)
        g.def_vmap(lambda n, b, x: (x, b[0]))
        return g(2.0)
    with pytest.raises(AssertionError):
        jax.vmap(closes_over)(X)
