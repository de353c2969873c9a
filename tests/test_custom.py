"""custom_jvp / custom_vjp: rules used by grad, jvp, vjp, linearize; higher order; vmap;
nondiff_argnums; nesting; make_jaxpr; closures; and the errors for bad rules.

Each custom function is built by a factory from a module `m` (fnad or jax), so the same
code defines the fnad version and the jax oracle.
"""
import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as fnp
from fnad import core
from fnad.custom import SymbolicZero
from fnad.ir import typecheck_jaxpr


class _JittedJax:
    """jax with `grad` and `vmap` results jitted: the oracle then compiles each composite
    once instead of every small op (several times faster)."""

    def __init__(self, jax):
        self._jax = jax

    def __getattr__(self, name):
        return getattr(self._jax, name)

    def grad(self, *args, **kwargs):
        return self._jax.jit(self._jax.grad(*args, **kwargs))

    def vmap(self, *args, **kwargs):
        return self._jax.jit(self._jax.vmap(*args, **kwargs))


@pytest.fixture
def jax():
    return _JittedJax(pytest.importorskip("jax", reason="jax is the oracle for these values"))


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """Runs the test in float32, and in float64 with x64 on (fnad and jax)."""
    if request.param == "float64":
        request.getfixturevalue("x64")
    return np.dtype(request.param)


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)


def close(a, b, dtype):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, **tol(dtype))


def tree_close(a, b, dtype):
    import jax
    la, ta = fnad.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert len(la) == len(lb), (ta, tb)
    for x, y in zip(la, lb):
        close(x, y, dtype)


# ---- the functions, for fnad and for jax ------------------------------------------------------
def make_log1pexp(m):
    jnp = m.numpy

    @m.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return log1pexp(x), x_dot * (1. - 1. / (1. + jnp.exp(x)))   # sigmoid(x)·dx
    return log1pexp


def make_safe_norm(m):
    jnp = m.numpy

    @m.custom_jvp
    def safe_norm(x):
        return jnp.sqrt(jnp.sum(x * x))

    @safe_norm.defjvp
    def safe_norm_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        n = safe_norm(x)
        denom = jnp.where(n == 0., 1., n)
        return n, jnp.sum(x * x_dot) / denom               # d|x| = x·dx/|x|, 0 at x=0
    return safe_norm


def make_defjvps(m):
    jnp = m.numpy

    @m.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y
    f.defjvps(lambda x_dot, out, x, y: jnp.cos(x) * x_dot * y,
              lambda y_dot, out, x, y: jnp.sin(x) * y_dot)
    return f


def make_clip_gradient(m):
    jnp = m.numpy

    @m.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))
    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)
    return clip_gradient


def make_pytree_vjp(m):
    """f(params, x) -> {"y": tanh(w·x + b), "s": Σx²}; residuals in a dict and a tuple."""
    jnp = m.numpy

    @m.custom_vjp
    def f(params, x):
        h = jnp.tanh(jnp.dot(params["w"], x) + params["b"])
        return {"y": h, "s": jnp.sum(x * x)}

    def f_fwd(params, x):
        h = jnp.tanh(jnp.dot(params["w"], x) + params["b"])
        return {"y": h, "s": jnp.sum(x * x)}, {"h": h, "wx": (params["w"], x)}

    def f_bwd(res, ct):
        h = res["h"]
        w, x = res["wx"]
        dz = ct["y"] * (1. - h * h)                            # tanh' = 1 - tanh²
        dw = dz[:, None] * x[None, :]
        dx = jnp.dot(dz, w) + 2. * ct["s"] * x
        return {"w": dw, "b": dz}, dx
    f.defvjp(f_fwd, f_bwd)
    return f


def make_nondiff_jvp(m):
    """app(fn, x) = fn(x) with the rule using fn: fn is a static (non-array) argument."""
    from functools import partial

    @partial(m.custom_jvp, nondiff_argnums=(0,))
    def app(fn, x):
        return fn(x)

    @app.defjvp
    def app_jvp(fn, primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return app(fn, x), 2. * x_dot                          # deliberately not fn'
    return app


def make_nondiff_vjp(m):
    from functools import partial
    jnp = m.numpy

    @partial(m.custom_vjp, nondiff_argnums=(0, 1))
    def clip(lo, hi, x):
        return jnp.sin(x)

    def clip_fwd(lo, hi, x):
        return jnp.sin(x), jnp.cos(x)

    def clip_bwd(lo, hi, cos_x, g):
        return (jnp.clip(g * cos_x, lo, hi),)
    clip.defvjp(clip_fwd, clip_bwd)
    return clip


def make_nested(m):
    """outer(x) = g(x)·x with g a custom_jvp; outer's rule calls g and outer again."""
    jnp = m.numpy
    g = make_log1pexp(m)

    @m.custom_jvp
    def outer(x):
        return g(x) * x

    @outer.defjvp
    def outer_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        sig = 1. / (1. + jnp.exp(-x))
        return outer(x), (g(x) + x * sig) * x_dot
    return outer


def make_vjp_in_jvp(m):
    """A custom_vjp function used inside a custom_jvp function's body (the body is what
    reverse mode of the rule's primal output runs)."""
    jnp = m.numpy
    clip = make_clip_gradient(m)

    @m.custom_jvp
    def f(x):
        return jnp.sin(clip(-0.25, 0.25, x))

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return f(x), jnp.cos(x) * x_dot
    return f


def both(make, jax):
    return make(fnad), make(jax)


# ---- custom_jvp ---------------------------------------------------------------------------------
def test_log1pexp_grad_is_stable_and_matches_jax(jax, dtype):
    f, jf = both(make_log1pexp, jax)
    xs = np.array([-3.0, 0.0, 0.7, 10.0, 100.0], dtype)
    for x in xs:
        g = fnad.grad(f)(x)
        close(g, jax.grad(jf)(x), dtype)
        assert np.isfinite(np.asarray(g))
    np.testing.assert_allclose(fnad.grad(f)(dtype.type(100.0)), 1.0)   # not nan: inf/inf
    close(f(xs), jf(xs), dtype)


def test_log1pexp_jvp_vjp_linearize(jax, dtype):
    f, jf = both(make_log1pexp, jax)
    x = np.array([-1.0, 0.5, 3.0], dtype)
    t = np.array([1.0, -2.0, 0.5], dtype)
    y, y_dot = fnad.jvp(f, (x,), (t,))
    jy, jy_dot = jax.jvp(jf, (x,), (t,))
    close(y, jy, dtype)
    close(y_dot, jy_dot, dtype)
    y2, f_lin = fnad.linearize(f, x)
    close(f_lin(t), jy_dot, dtype)
    _, vjp_fn = fnad.vjp(f, x)
    close(vjp_fn(t)[0], jax.vjp(jf, x)[1](t)[0], dtype)


def test_safe_norm_grad_at_zero(jax, dtype):
    f, jf = both(make_safe_norm, jax)
    zero = np.zeros(3, dtype)
    g = fnad.grad(f)(zero)
    np.testing.assert_array_equal(np.asarray(g), np.zeros(3, dtype))   # plain AD gives nan
    x = np.array([3.0, -4.0, 1.0], dtype)
    close(fnad.grad(f)(x), jax.grad(jf)(x), dtype)
    close(fnad.grad(f)(zero), jax.grad(jf)(zero), dtype)


def test_defjvps(jax, dtype):
    f, jf = both(make_defjvps, jax)
    x, y = dtype.type(0.8), dtype.type(-1.5)
    for argnums in (0, 1, (0, 1)):
        tree_close(fnad.grad(f, argnums)(x, y), jax.grad(jf, argnums)(x, y), dtype)
    one, zero = dtype.type(1.0), dtype.type(0.0)
    close(fnad.jvp(f, (x, y), (one, zero))[1], jax.jvp(jf, (x, y), (one, zero))[1], dtype)


def test_symbolic_zeros_reach_the_rule():
    seen = []

    @fnad.custom_jvp
    def f(x, y):
        return x * y

    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        seen.append((type(x_dot) is SymbolicZero, type(y_dot) is SymbolicZero))
        t = x_dot * y if type(x_dot) is not SymbolicZero else SymbolicZero(
            core.get_aval(x * y).to_tangent_aval())
        return f(x, y), t
    f.defjvp(f_jvp, symbolic_zeros=True)
    g = fnad.grad(f)(np.float32(2.0), np.float32(3.0))
    np.testing.assert_allclose(g, 3.0)
    assert seen == [(False, True)]


def test_custom_jvp_higher_order(jax, dtype):
    f, jf = both(make_log1pexp, jax)
    for x in (dtype.type(-1.0), dtype.type(0.3), dtype.type(2.0)):
        close(fnad.grad(fnad.grad(f))(x), jax.grad(jax.grad(jf))(x), dtype)
        close(fnad.grad(fnad.grad(fnad.grad(f)))(x), jax.grad(jax.grad(jax.grad(jf)))(x),
              dtype)
        one = dtype.type(1.0)
        close(fnad.jvp(fnad.grad(f), (x,), (one,))[1],          # forward over reverse
              jax.jvp(jax.grad(jf), (x,), (one,))[1], dtype)
        close(fnad.grad(lambda z: fnad.jvp(f, (z,), (one,))[1])(x),   # reverse over forward
              jax.grad(lambda z: jax.jvp(jf, (z,), (one,))[1])(x), dtype)


def test_second_derivative_comes_from_the_rule_not_the_function():
    @fnad.custom_jvp
    def f(x):
        return fnad.numpy.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return f(x), 3. * x * x * x_dot                       # pretend f' = 3x² (i.e. x³)
    x = np.float32(1.5)
    np.testing.assert_allclose(fnad.grad(f)(x), 3 * 1.5 ** 2, rtol=1e-6)
    np.testing.assert_allclose(fnad.grad(fnad.grad(f))(x), 6 * 1.5, rtol=1e-6)


def test_nondiff_argnums_custom_jvp(jax, dtype):
    app, japp = both(make_nondiff_jvp, jax)
    x = dtype.type(0.7)
    close(fnad.grad(lambda x: app(fnad.numpy.sin, x))(x),
          jax.grad(lambda x: japp(jax.numpy.sin, x))(x), dtype)
    np.testing.assert_allclose(fnad.grad(lambda x: app(fnad.numpy.sin, x))(x), 2.0)
    close(app(fnad.numpy.sin, x), np.sin(x), dtype)


def test_nondiff_tracer_in_custom_jvp_is_not_differentiated(jax):
    from functools import partial

    def make(m):
        @partial(m.custom_jvp, nondiff_argnums=(0,))
        def scale(s, x):
            return s * x

        @scale.defjvp
        def scale_jvp(s, primals, tangents):
            return scale(s, primals[0]), s * tangents[0]
        return scale
    f, jf = both(make, jax)
    h = lambda s, x: f(s, x) * s
    jh = lambda s, x: jf(s, x) * s
    s, x = np.float32(2.0), np.float32(3.0)
    tree_close(fnad.grad(h, (0, 1))(s, x), jax.grad(jh, (0, 1))(s, x), np.float32)


def test_nested_custom_jvp(jax, dtype):
    f, jf = both(make_nested, jax)
    for x in (dtype.type(-0.5), dtype.type(1.25)):
        close(f(x), jf(x), dtype)
        close(fnad.grad(f)(x), jax.grad(jf)(x), dtype)
        close(fnad.grad(fnad.grad(f))(x), jax.grad(jax.grad(jf))(x), dtype)
    inner = fnad.make_jaxpr(f)(x).eqns[0].params["call_jaxpr"]
    assert inner.eqns[0].primitive.name == "custom_jvp_call"        # g, staged inside f


def test_custom_vjp_inside_custom_jvp(jax, dtype):
    f, jf = both(make_vjp_in_jvp, jax)
    x = dtype.type(0.6)
    close(fnad.grad(f)(x), jax.grad(jf)(x), dtype)
    xs = np.array([0.1, 0.9, -2.0], dtype)
    close(fnad.vmap(f)(xs), jax.vmap(jf)(xs), dtype)
    close(fnad.vmap(fnad.grad(f))(xs), jax.vmap(jax.grad(jf))(xs), dtype)
    # the custom_vjp's own rule: grad of the body, which the custom_jvp rule does not use
    body = lambda x: fnad.numpy.sum(fnad.numpy.sin(make_clip_gradient(fnad)(-0.25, 0.25, x)))
    g = fnad.grad(body)(xs)
    close(g, np.clip(np.cos(xs), -0.25, 0.25), dtype)              # bwd clips the cotangent


# ---- custom_jvp under vmap ------------------------------------------------------------------
def test_custom_jvp_under_vmap(jax, dtype):
    f, jf = both(make_log1pexp, jax)
    xs = np.linspace(-3, 90, 7).astype(dtype)
    close(fnad.vmap(f)(xs), jax.vmap(jf)(xs), dtype)
    close(fnad.vmap(fnad.grad(f))(xs), jax.vmap(jax.grad(jf))(xs), dtype)
    total = lambda x: fnad.numpy.sum(fnad.vmap(f)(x))
    close(fnad.grad(total)(xs), jax.grad(lambda x: jax.numpy.sum(jax.vmap(jf)(x)))(xs), dtype)
    assert np.isfinite(np.asarray(fnad.grad(total)(xs))).all()
    xm = xs[:6].reshape(2, 3)
    tm = np.ones_like(xm)
    close(fnad.jvp(fnad.vmap(f, in_axes=1, out_axes=1), (xm,), (tm,))[1],
          jax.jvp(jax.vmap(jf, in_axes=1, out_axes=1), (xm,), (tm,))[1], dtype)
    close(fnad.vmap(fnad.vmap(fnad.grad(f)))(xm), jax.vmap(jax.vmap(jax.grad(jf)))(xm), dtype)
    close(fnad.vmap(fnad.grad(fnad.grad(f)))(xs), jax.vmap(jax.grad(jax.grad(jf)))(xs), dtype)


def test_custom_jvp_vmap_with_unbatched_args(jax, dtype):
    f, jf = both(make_defjvps, jax)
    xs = np.linspace(-1, 1, 4).astype(dtype)
    y = dtype.type(2.5)
    close(fnad.vmap(f, in_axes=(0, None))(xs, y), jax.vmap(jf, in_axes=(0, None))(xs, y), dtype)
    g = lambda y, xs: fnad.numpy.sum(fnad.vmap(f, in_axes=(0, None))(xs, y))
    jg = lambda y, xs: jax.numpy.sum(jax.vmap(jf, in_axes=(0, None))(xs, y))
    tree_close(fnad.grad(g, (0, 1))(y, xs), jax.grad(jg, (0, 1))(y, xs), dtype)
    tree_close(fnad.vmap(fnad.grad(f, (0, 1)), in_axes=(0, None))(xs, y),
               jax.vmap(jax.grad(jf, (0, 1)), in_axes=(0, None))(xs, y), dtype)


# ---- custom_vjp --------------------------------------------------------------------------------
def test_clip_gradient(jax, dtype):
    f, jf = both(make_clip_gradient, jax)
    loss = lambda x: fnad.numpy.sum(f(-0.5, 0.5, 3. * x) ** 2)
    jloss = lambda x: jax.numpy.sum(jf(-0.5, 0.5, 3. * x) ** 2)
    x = np.array([-1.0, 0.05, 0.1, 2.0], dtype)
    g = fnad.grad(loss)(x)
    close(g, jax.grad(jloss)(x), dtype)
    close(g, 3. * np.clip(2 * 3. * x, -0.5, 0.5), dtype)
    close(f(-0.5, 0.5, x), x, dtype)


def test_custom_vjp_pytree_args_and_residuals(jax, dtype):
    f, jf = both(make_pytree_vjp, jax)
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(3, 4)).astype(dtype), "b": rng.normal(size=3).astype(dtype)}
    x = rng.normal(size=4).astype(dtype)

    def loss(m, f):
        def fn(params, x):
            out = f(params, x)
            return m.numpy.sum(out["y"] * m.numpy.arange(1., 4.)) + 0.5 * out["s"]
        return fn
    tree_close(f(params, x), jf(params, x), dtype)
    tree_close(fnad.grad(loss(fnad, f), (0, 1))(params, x),
               jax.grad(loss(jax, jf), (0, 1))(params, x), dtype)
    out, vjp_fn = fnad.vjp(f, params, x)
    jout, jvjp_fn = jax.vjp(jf, params, x)
    ct = {"y": np.ones(3, dtype), "s": dtype.type(2.0)}
    tree_close(vjp_fn(ct), jvjp_fn(ct), dtype)


def test_custom_vjp_rule_is_used_not_autodiff():
    @fnad.custom_vjp
    def f(x):
        return fnad.numpy.sin(x)
    f.defvjp(lambda x: (f(x), x), lambda x, g: (10. * g,))
    np.testing.assert_allclose(fnad.grad(f)(np.float32(0.3)), 10.0)


def test_nondiff_argnums_custom_vjp(jax, dtype):
    f, jf = both(make_nondiff_vjp, jax)
    x = np.array([0.1, 1.0, 3.0], dtype)
    loss = lambda x: fnad.numpy.sum(f(-0.3, 0.3, 2. * x))
    jloss = lambda x: jax.numpy.sum(jf(-0.3, 0.3, 2. * x))
    close(fnad.grad(loss)(x), jax.grad(jloss)(x), dtype)
    close(f(-0.3, 0.3, x), np.sin(x), dtype)


def test_custom_vjp_higher_order(jax, dtype):
    """grad of grad differentiates fwd and bwd themselves (as JAX does)."""
    def make(m):
        jnp = m.numpy

        @m.custom_vjp
        def f(x):
            return jnp.sin(x) * x

        def f_fwd(x):
            return jnp.sin(x) * x, (jnp.sin(x), jnp.cos(x), x)

        def f_bwd(res, g):
            s, c, x = res
            return ((s + x * c) * g,)
        f.defvjp(f_fwd, f_bwd)
        return f
    f, jf = both(make, jax)
    x = dtype.type(0.9)
    close(fnad.grad(fnad.grad(f))(x), jax.grad(jax.grad(jf))(x), dtype)
    close(fnad.jvp(fnad.grad(f), (x,), (dtype.type(1.0),))[1],
          jax.jvp(jax.grad(jf), (x,), (dtype.type(1.0),))[1], dtype)


# ---- custom_vjp under vmap ----------------------------------------------------------------------
def test_custom_vjp_under_vmap(jax, dtype):
    f, jf = both(make_clip_gradient, jax)
    xs = np.array([-1.0, 0.05, 0.1, 2.0], dtype)
    h = lambda x: f(-0.5, 0.5, 3. * x) ** 2
    jh = lambda x: jf(-0.5, 0.5, 3. * x) ** 2
    close(fnad.vmap(h)(xs), jax.vmap(jh)(xs), dtype)
    close(fnad.vmap(fnad.grad(h))(xs), jax.vmap(jax.grad(jh))(xs), dtype)
    close(fnad.grad(lambda x: fnad.numpy.sum(fnad.vmap(h)(x)))(xs),
          jax.grad(lambda x: jax.numpy.sum(jax.vmap(jh)(x)))(xs), dtype)
    xm = np.stack([xs, 2 * xs])
    close(fnad.vmap(fnad.vmap(fnad.grad(h)))(xm), jax.vmap(jax.vmap(jax.grad(jh)))(xm), dtype)


def test_custom_vjp_vmap_unbatched_params_get_summed_cotangents(jax, dtype):
    f, jf = both(make_pytree_vjp, jax)
    rng = np.random.default_rng(1)
    params = {"w": rng.normal(size=(3, 4)).astype(dtype), "b": rng.normal(size=3).astype(dtype)}
    xs = rng.normal(size=(5, 4)).astype(dtype)

    def loss(m, f):
        def fn(params, xs):
            out = m.vmap(f, in_axes=(None, 0))(params, xs)
            return m.numpy.sum(out["y"] ** 2) + m.numpy.sum(out["s"])
        return fn
    tree_close(fnad.grad(loss(fnad, f), (0, 1))(params, xs),
               jax.grad(loss(jax, jf), (0, 1))(params, xs), dtype)
    per_example = lambda m, f: m.vmap(m.grad(lambda p, x: m.numpy.sum(f(p, x)["y"])),
                                      in_axes=(None, 0))
    tree_close(per_example(fnad, f)(params, xs), per_example(jax, jf)(params, xs), dtype)
    batched_w = np.stack([params["w"]] * 5) + rng.normal(size=(5, 3, 4)).astype(dtype)

    def loss2(m, f):
        def fn(w, xs):
            out = m.vmap(lambda w, x: f({"w": w, "b": params["b"]}, x), in_axes=(0, 0))(w, xs)
            return m.numpy.sum(out["y"])
        return fn
    tree_close(fnad.grad(loss2(fnad, f))(batched_w, xs), jax.grad(loss2(jax, jf))(batched_w, xs),
               dtype)


# ---- staging -----------------------------------------------------------------------------------
def test_make_jaxpr_shows_the_calls():
    f = make_log1pexp(fnad)
    closed = fnad.make_jaxpr(f)(np.float32(1.0))
    text = str(closed)
    assert "custom_jvp_call[" in text and "jvp=log1pexp_jvp" in text
    assert "call_jaxpr={ lambda ; " in text and "exp" in text
    assert [e.primitive.name for e in closed.eqns] == ["custom_jvp_call"]
    typecheck_jaxpr(closed.jaxpr)
    c = make_clip_gradient(fnad)
    closed = fnad.make_jaxpr(lambda x: c(-1., 1., x))(np.ones(3, np.float32))
    assert [e.primitive.name for e in closed.eqns] == ["custom_vjp_call"]
    assert "clip_gradient_fwd/clip_gradient_bwd" in str(closed)
    typecheck_jaxpr(closed.jaxpr)


def test_staged_call_keeps_its_rules():
    """A jaxpr holding the call, evaluated under grad and vmap, still uses the rules."""
    f = make_log1pexp(fnad)
    g = traced(fnad.grad(f))(np.float32(100.0))
    np.testing.assert_allclose(g, 1.0)
    np.testing.assert_allclose(fnad.grad(traced(f))(np.float32(100.0)), 1.0)
    c = make_clip_gradient(fnad)
    h = traced(lambda x: c(-0.5, 0.5, x))
    np.testing.assert_allclose(fnad.grad(lambda x: fnad.numpy.sum(h(3. * x)))(np.ones(2)),
                               [1.5, 1.5])
    gs = fnad.vmap(fnad.grad(traced(lambda x: c(-0.5, 0.5, 3. * x))))(np.ones(2, np.float32))
    np.testing.assert_allclose(gs, [1.5, 1.5])
    closed = fnad.make_jaxpr(fnad.grad(lambda x: c(-0.5, 0.5, 3. * x)))(np.float32(1.))
    text = str(closed)                     # the primal ran into the jaxpr; bwd's clip too
    assert "max" in text and "min" in text and "custom_lin" not in text
    typecheck_jaxpr(closed.jaxpr)


# ---- closures -----------------------------------------------------------------------------------
def test_closed_over_values_are_operands(jax):
    def make(m, w):
        @m.custom_jvp
        def f(x):
            return m.numpy.sin(x) * w

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (x_dot,) = primals, tangents
            return f(x), m.numpy.cos(x) * w * x_dot
        return f
    w = np.array([1.0, 2.0, 3.0], np.float32)
    xs = np.array([0.1, 0.2, 0.3], np.float32)
    close(fnad.grad(lambda x: fnad.numpy.sum(make(fnad, w)(x)))(xs),
          jax.grad(lambda x: jax.numpy.sum(make(jax, w)(x)))(xs), np.float32)
    # a batched closed-over value: the staged function gets it as a batched operand
    ws = np.stack([w, 2 * w])
    close(fnad.vmap(lambda w: make(fnad, w)(xs))(ws),
          jax.vmap(lambda w: make(jax, w)(xs))(ws), np.float32)
    closed = fnad.make_jaxpr(lambda w: make(fnad, w)(xs))(w)
    assert closed.eqns[0].params["num_consts"] == 1
    typecheck_jaxpr(closed.jaxpr)


def test_rules_closing_over_batched_values(jax):
    """A rule that closes over a value of the vmap batching the call (a closure, or a
    traced nondiff argument) sees it batched, as in JAX."""
    from functools import partial

    def make(m):
        def outer(w, x):
            @m.custom_jvp
            def f(x):
                return m.numpy.sin(x) * w

            @f.defjvp
            def f_jvp(primals, tangents):
                (x,), (x_dot,) = primals, tangents
                return f(x), 2. * m.numpy.cos(x) * w * x_dot       # 2×: the rule is used

            @m.custom_vjp
            def g(x):
                return m.numpy.cos(x) * w
            g.defvjp(lambda x: (g(x), m.numpy.sin(x) * w), lambda r, ct: (-3. * r * ct,))

            @partial(m.custom_jvp, nondiff_argnums=(0,))
            def scale(s, x):
                return s * x
            scale.defjvp(lambda s, p, t: (scale(s, p[0]), 5. * s * t[0]))
            return f(x) + g(x) + scale(w, x)
        return outer
    jax = jax._jax        # unjitted: jax reports a leak for jit(vmap(jit(grad))) of these
    o, jo = both(make, jax)
    ws = np.array([1.0, 2.0, 3.0], np.float32)
    xs = np.array([0.1, 0.2, 0.3], np.float32)
    loss = lambda m, o: (lambda xs: m.numpy.sum(m.vmap(o)(ws, xs)))
    close(fnad.grad(loss(fnad, o))(xs), jax.grad(loss(jax, jo))(xs), np.float32)
    close(fnad.vmap(fnad.grad(o, 1))(ws, xs), jax.vmap(jax.grad(jo, 1))(ws, xs), np.float32)
    nested = lambda m, o: (lambda xs: m.numpy.sum(
        m.vmap(m.vmap(o, (None, 0)), (0, None))(ws, xs)))
    close(fnad.grad(nested(fnad, o))(xs), jax.grad(nested(jax, jo))(xs), np.float32)


def test_differentiating_a_closed_over_value_is_an_error():
    def outer(w):
        @fnad.custom_jvp
        def f(x):
            return x * w
        f.defjvp(lambda p, t: (f(p[0]), t[0] * w))
        return f(np.float32(2.0))
    raises_with(lambda: fnad.grad(outer)(np.float32(3.0)), "custom_jvp function f",
                "closed-over value", exc=TypeError)

    def outer_vjp(w):
        @fnad.custom_vjp
        def f(x):
            return x * w
        f.defvjp(lambda x: (f(x), None), lambda _, g: (g * w,))
        return f(np.float32(2.0))
    raises_with(lambda: fnad.grad(outer_vjp)(np.float32(3.0)), "custom_vjp function f",
                "closed-over value", exc=TypeError)


# ---- errors ------------------------------------------------------------------------------------
def test_jvp_rule_with_wrong_output_structure():
    @fnad.custom_jvp
    def f(x):
        return x * 2., x

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return x * 2., t * 2.                                  # one output, f has two
    raises_with(lambda: fnad.jvp(f, (1.0,), (1.0,)), "custom_jvp rule f_jvp for f",
                "returns (f32[], f32[])", exc=TypeError)

    @fnad.custom_jvp
    def g(x):
        return x * 2.
    g.defjvp(lambda p, t: (g(p[0]), (t[0], t[0])))
    raises_with(lambda: fnad.grad(g)(1.0), "custom_jvp rule <lambda> for g",
                "tangent output with structure", exc=TypeError)
    g.defjvp(lambda p, t: g(p[0]))
    raises_with(lambda: fnad.grad(g)(1.0), "custom_jvp rule <lambda> for g", "must return a pair",
                exc=TypeError)


def test_jvp_rule_with_wrong_shape_or_dtype():
    @fnad.custom_jvp
    def f(x):
        return x * 2.

    def f_jvp(primals, tangents):
        (x,), _ = primals, tangents
        return f(x), fnad.numpy.ones(4, np.float32)
    f.defjvp(f_jvp)
    raises_with(lambda: fnad.grad(f)(np.float32(1.0)), "custom_jvp rule f_jvp for f",
                "tangent output 0 of type f32[4]", "must have type f32[]", exc=TypeError)
    f.defjvp(lambda p, t: (fnad.numpy.ones(3), t[0]))
    raises_with(lambda: fnad.grad(f)(np.float32(1.0)), "for f", "primal output 0 of type f32[3]",
                "f returns f32[]", exc=TypeError)
    f.defjvp(lambda p, t: (f(p[0]), fnad.numpy.asarray(t[0], np.int32)))
    raises_with(lambda: fnad.grad(f)(np.float32(1.0)), "tangent output 0 of type i32[]",
                exc=TypeError)


def test_fwd_and_bwd_with_wrong_structure():
    @fnad.custom_vjp
    def f(x, y):
        return x * y

    def f_fwd(x, y):
        return (x * y, x), (x, y)                              # two outputs, f has one

    def f_bwd(res, g):
        x, y = res
        return (g * y, g * x)
    f.defvjp(f_fwd, f_bwd)
    raises_with(lambda: fnad.grad(f)(1.0, 2.0), "custom_vjp fwd rule f_fwd for f",
                "primal output with structure", exc=TypeError)
    f.defvjp(lambda x, y: x * y, f_bwd)
    raises_with(lambda: fnad.grad(f)(1.0, 2.0), "fwd rule <lambda> for f", "pair",
                exc=TypeError)

    def bad_bwd(res, g):
        return g * res[1]                                      # not a tuple per argument
    f.defvjp(lambda x, y: (x * y, (x, y)), bad_bwd)
    raises_with(lambda: fnad.grad(f)(1.0, 2.0), "custom_vjp bwd rule bad_bwd for f",
                "one cotangent (or None) per differentiable argument", "(2)", exc=TypeError)

    def short_bwd(res, g):
        return (g,)
    f.defvjp(lambda x, y: (x * y, (x, y)), short_bwd)
    raises_with(lambda: fnad.grad(f)(1.0, 2.0), "bwd rule short_bwd for f",
                "tuple of length 1", exc=TypeError)

    def shape_bwd(res, g):
        return (g * fnad.numpy.ones(3), None)
    f.defvjp(lambda x, y: (x * y, (x, y)), shape_bwd)
    raises_with(lambda: fnad.grad(f)(np.float32(1.0), np.float32(2.0)),
                "bwd rule shape_bwd for f", "type f32[3] for argument leaf 0 of type f32[]",
                exc=ValueError)                                # as jax's

    @fnad.custom_vjp
    def p(tree):
        return tree["a"] * tree["b"]

    def p_bwd(res, g):
        return ({"a": g},)                                     # missing "b"
    p.defvjp(lambda t: (p(t), None), p_bwd)
    raises_with(lambda: fnad.grad(p)({"a": 1.0, "b": 2.0}), "bwd rule p_bwd for p",
                "does not match the arguments", exc=TypeError)


def test_jvp_of_custom_vjp_is_an_error():
    c = make_clip_gradient(fnad)
    raises_with(lambda: fnad.jvp(lambda x: c(-1., 1., x), (1.0,), (1.0,)),
                "can't apply forward-mode autodiff (jvp) to a custom_vjp function",
                "clip_gradient", exc=TypeError)
    raises_with(lambda: fnad.vmap(lambda x: fnad.jvp(lambda x: c(-1., 1., x), (x,), (x,)))(
        np.ones(3, np.float32)), "forward-mode", exc=TypeError)
    _, f_lin = fnad.linearize(lambda x: c(-1., 1., x), 1.0)
    raises_with(lambda: f_lin(1.0), "forward-mode", exc=TypeError)


def test_missing_rules_and_nondiff_tracers():
    f = fnad.custom_jvp(lambda x: x)
    raises_with(lambda: f(1.0), "No JVP defined for custom_jvp function <lambda>",
                exc=AttributeError)
    g = fnad.custom_vjp(lambda x: x)
    raises_with(lambda: g(1.0), "No VJP defined for custom_vjp function", exc=AttributeError)
    h = make_nondiff_vjp(fnad)
    raises_with(lambda: fnad.grad(lambda lo: h(lo, 1.0, 2.0))(0.5),
                "traced value as argument 0", "nondiff_argnums",
                exc=fnad.UnexpectedTracerError)
    with pytest.raises(NotImplementedError, match="symbolic_zeros"):
        g.defvjp(lambda x: (x, None), lambda r, t: (t,), symbolic_zeros=True)


def test_keyword_arguments_are_resolved():
    f = make_defjvps(fnad)
    np.testing.assert_allclose(fnad.grad(lambda y: f(0.5, y=y))(2.0), np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(fnad.grad(lambda x: f(y=2.0, x=x))(0.5), 2 * np.cos(0.5),
                               rtol=1e-6)


# ---- custom_gradient and closure_convert ---------------------------------------------------
def _log1pexp(m):
    @m.custom_gradient
    def log1pexp(x):
        e = m.numpy.exp(x)                              # closed over by the vjp function
        return m.numpy.log1p(e), lambda g: g * (1 - 1 / (1 + e))
    return log1pexp


def _scaled_pair(m):
    @m.custom_gradient
    def f(x, y):
        out = {"p": x * y, "q": x + y}
        return out, lambda g: (2.0 * g["p"] + g["q"], 3.0 * g["p"] * y)
    return f


def test_custom_gradient_matches_jax(jax):
    x = np.linspace(-3.0, 3.0, 7)
    want = jax.vmap(jax.grad(_log1pexp(jax)))(x)
    np.testing.assert_allclose(fnad.vmap(fnad.grad(_log1pexp(fnad)))(x), want, rtol=1e-6)
    np.testing.assert_allclose(traced(fnad.grad(lambda v: _log1pexp(fnad)(v).sum()))(x),
                               want, rtol=1e-6)
    np.testing.assert_allclose(_log1pexp(fnad)(x), np.log1p(np.exp(x)), rtol=1e-6)

    def loss(m):
        return lambda a, b: m.numpy.sum(m.numpy.sin(_scaled_pair(m)(a, b)["p"]) +
                                        _scaled_pair(m)(a, b)["q"] ** 2)
    a, b = np.array([0.5, -1.0]), np.array([2.0, 0.25])
    got = fnad.grad(loss(fnad), argnums=(0, 1))(a, b)
    want = jax.grad(loss(jax), argnums=(0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_custom_gradient_errors():
    bad = fnad.custom_gradient(lambda x: (x * 2.0, lambda g: g, 1))
    with pytest.raises(TypeError, match="must return a pair"):
        fnad.grad(bad)(1.0)
    not_fn = fnad.custom_gradient(lambda x: (x * 2.0, 3.0))
    with pytest.raises(TypeError, match="second element is a float"):
        fnad.grad(not_fn)(1.0)
    with pytest.raises(TypeError, match="forward"):
        fnad.jvp(_log1pexp(fnad), (1.0,), (1.0,))


def test_closure_convert_hoists_traced_values_only(jax):
    def outer(m):
        def f(x, y):
            g = lambda z: m.numpy.sin(z * y) * 2.0                # noqa: E731
            conv, consts = m.closure_convert(g, x)
            return conv(x, *consts).sum(), len(consts)
        return f
    x = np.ones(3)
    value, n = outer(fnad)(x, 2.0)
    assert n == 0 and np.isclose(value, 3 * 2 * np.sin(2.0))       # 2.0 is not traced
    got = fnad.grad(lambda x, y: outer(fnad)(x, y)[0], argnums=1)(x, 2.0)
    want = jax.grad(lambda x, y: outer(jax)(x, y)[0], argnums=1)(x, 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-6)

    def count(y):
        _, consts = fnad.closure_convert(lambda z: z * y, 1.0)
        assert len(consts) == 1 and isinstance(consts[0], core.Tracer)
        return y
    fnad.grad(count)(1.0)
    conv, _ = fnad.closure_convert(lambda p: {"s": p[0] + p[1]}, (1.0, 2.0))
    assert float(conv((3.0, 4.0))["s"]) == 7.0
    with pytest.raises(TypeError, match="structure"):
        conv([3.0, 4.0])


# ---- rules that create array constants, re-run while a sub-jaxpr is transformed ---------
def _const_rules():
    """A custom_jvp and a custom_vjp whose rules build array constants: when jit's, scan's,
    cond's or while's body is differentiated, the rules run again and their constants
    must become operands of the transformed sub-jaxpr (they were an assertion error)."""
    import fnad.numpy as jnp

    @fnad.custom_jvp
    def h(x):
        return jnp.sin(x)

    @h.defjvp
    def h_jvp(p, t):
        return h(p[0]), t[0] * jnp.cos(p[0]) * jnp.array([1.0, 2.0])

    @fnad.custom_vjp
    def q(x):
        return x * 2.0

    def q_fwd(x):
        return x * jnp.array([2.0, 2.0]), x

    def q_bwd(r, g):
        return (g * jnp.array([1.0, 3.0]) * r,)
    q.defvjp(q_fwd, q_bwd)
    return h, q


def test_rules_that_create_constants_inside_jit_scan_cond_and_while():
    from fnad import lax
    h, q = _const_rules()
    x = np.array([1.0, 1.0], np.float32)
    np.testing.assert_allclose(fnad.grad(traced(lambda v: h(v).sum()))(x), np.cos(x) * [1, 2])
    np.testing.assert_allclose(fnad.grad(traced(lambda v: q(v).sum()))(x), [1.0, 3.0])

    def scanned(v):
        return lax.scan(lambda c, _: (q(c), c.sum()), v, None, length=3)[0].sum()
    want = np.array([8.0, 216.0])          # ct through r = 4x, 2x, x with bwd's [1, 3]
    for f in (fnad.grad(scanned), traced(fnad.grad(scanned))):
        np.testing.assert_allclose(f(x), want)
    np.testing.assert_allclose(fnad.vmap(fnad.grad(scanned))(np.stack([x, 2 * x])),
                               [want, want * 8])              # r triples in x: 2³
    c = 0.3 * x
    for p in (True, False):
        g = fnad.grad(lambda v: lax.cond(p, lambda u: h(u).sum(), lambda u: q(u).sum(), v))(c)
        np.testing.assert_allclose(g, np.cos(c) * [1, 2] if p else c * [1, 3], rtol=1e-6)
    _, tan = fnad.jvp(lambda v: lax.while_loop(lambda s: s[1] < 2,
                                               lambda s: (h(s[0]), s[1] + 1), (v, 0))[0],
                      (c,), (np.ones(2, np.float32),))
    s1 = np.sin(c)
    np.testing.assert_allclose(tan, np.cos(s1) * np.cos(c) * [1, 4], rtol=1e-6)
    sc = fnad.grad(lambda v: lax.scan(lambda cc, _: (h(cc), 0.0), v, None, length=2)[0].sum())
    np.testing.assert_allclose(sc(c), np.cos(np.sin(c)) * np.cos(c) * [1, 4], rtol=1e-6)


def test_rules_see_python_number_primals_as_arrays():
    """grad/jvp of a number: the custom rules' primals are weak-typed arrays (with .shape
    and .dtype), as jax's grad gives them typed scalars."""
    seen = []

    @fnad.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        seen.append((primals[0].shape, primals[0].dtype))
        return f(primals[0]), tangents[0] * fnp.cos(primals[0])

    @fnad.custom_vjp
    def g(x):
        return fnp.sin(x)

    def g_fwd(x):
        seen.append((x.shape, x.dtype))
        return g(x), x
    g.defvjp(g_fwd, lambda x, ct: (ct * fnp.cos(x),))
    for h in (f, g):
        np.testing.assert_allclose(fnad.grad(h)(1.0), np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(fnad.jvp(f, (2.0,), (1.0,))[1], np.cos(2.0), rtol=1e-6)
    np.testing.assert_allclose(fnad.grad(fnad.grad(f))(1.0), -np.sin(1.0), rtol=1e-6)
    assert seen and all(s == ((), np.float32) for s in seen), seen
