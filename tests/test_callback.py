"""fnad.pure_callback: values (jax as the oracle), jit on every backend, dead-code
elimination, vmap by each vmap_method (a Python loop as the oracle, and the shapes the
callback sees against jax's), grad's error and custom_jvp, and bad results."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad.callback import VMAP_METHODS

BACKENDS = ["numpy", "numba", "xla"]
F32 = np.float32
X = np.array([0.5, -1.0, 2.0], F32)
SDS = fnad.ShapeDtypeStruct((3,), jnp.float32)


def _host_fn(x, y, *, scale):
    """Two results from NumPy, as a pytree: {"s": sin(x) * scale + y, "n": sum(x)}."""
    x, y = np.asarray(x), np.asarray(y)
    return {"s": np.sin(x) * scale + y, "n": x.sum()}


def _uses_callback(x, y):
    out = fnad.pure_callback(_host_fn, {"s": SDS, "n": fnad.ShapeDtypeStruct((), F32)},
                             x, y, scale=2.0)
    return out["s"] * out["n"] + 1.0


def _want(x, y):
    return (np.sin(x) * 2.0 + y) * x.sum() + 1.0


def test_eager_and_arguments():
    seen = []

    def record(a, label):
        seen.append((type(a), label))
        return np.asarray(a) * 2
    out = fnad.pure_callback(record, SDS, jnp.asarray(X), "static")
    assert out.tolist() == (X * 2).tolist() and out.dtype == np.float32
    assert seen == [(fnad.Array, "static")]             # Arrays in; other leaves as given
    np.testing.assert_allclose(_uses_callback(X, X), _want(X, X), rtol=1e-6)


def test_matches_jax():
    jax = pytest.importorskip("jax", reason="the oracle is jax")
    import jax.numpy as jjnp

    def theirs(x, y):
        out = jax.pure_callback(_host_fn, {"s": jax.ShapeDtypeStruct((3,), F32),
                                           "n": jax.ShapeDtypeStruct((), F32)},
                                x, y, scale=2.0, vmap_method="sequential")
        return out["s"] * out["n"] + 1.0
    np.testing.assert_allclose(np.asarray(_uses_callback(X, X + 1)),
                               np.asarray(jax.jit(theirs)(jjnp.asarray(X), jjnp.asarray(X + 1))),
                               rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_under_jit(backend):
    if backend == "xla":
        pytest.importorskip("jax", reason="the xla backend needs jax")
    f = fnad.jit(_uses_callback, backend=backend)
    np.testing.assert_allclose(np.asarray(f(X, X + 1)), _want(X, X + 1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(X * 2, X)), _want(X * 2, X), rtol=1e-6)


def test_staged_and_dropped_when_unused():
    calls = []

    def counted(x):
        calls.append(1)
        return np.asarray(x) + 1

    def f(x):
        unused = fnad.pure_callback(counted, SDS, x)     # noqa: F841  pure: dropped
        return x * 2
    assert "pure_callback[" in str(fnad.make_jaxpr(
        lambda x: fnad.pure_callback(counted, SDS, x))(X))
    assert fnad.jit(f)(X).tolist() == (X * 2).tolist() and calls == []
    g = fnad.jit(lambda x: fnad.pure_callback(counted, SDS, x) * 3)
    assert g(X).tolist() == ((X + 1) * 3).tolist() and calls == [1]
    assert g(X).tolist() == ((X + 1) * 3).tolist() and calls == [1, 1]    # each call


def _seen_shapes(method):
    """vmap over the first argument of a two-argument callback: the result and the shapes
    each call of the callback got."""
    seen = []

    def inner(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return np.asarray(a) * np.asarray(b)

    def g(a, b):
        return fnad.pure_callback(inner, SDS, a, b, vmap_method=method)
    a = np.arange(6, dtype=F32).reshape(3, 2).T              # batch axis 1 of [3, 2]
    out = fnad.vmap(g, in_axes=(1, None))(a.T, X)
    return out, seen


@pytest.mark.parametrize("method", VMAP_METHODS)
def test_vmap_methods(method):
    out, seen = _seen_shapes(method)
    a = np.arange(6, dtype=F32).reshape(3, 2).T
    loop = np.stack([a[i] * X for i in range(2)])             # the Python loop's answer
    np.testing.assert_array_equal(np.asarray(out), loop)
    want = {"sequential": [((3,), (3,))] * 2, "sequential_unrolled": [((3,), (3,))] * 2,
            "expand_dims": [((2, 3), (1, 3))], "broadcast_all": [((2, 3), (2, 3))],
            "legacy_vectorized": [((2, 3), (3,))]}[method]
    assert seen == want


@pytest.mark.parametrize("method", VMAP_METHODS)
def test_vmap_methods_match_jax(method):
    jax = pytest.importorskip("jax", reason="the oracle is jax")
    seen = []

    def inner(a, b):
        seen.append((np.shape(a), np.shape(b)))
        return np.asarray(a) * np.asarray(b)
    a = np.arange(6, dtype=F32).reshape(2, 3)
    out = jax.vmap(lambda u, v: jax.pure_callback(inner, jax.ShapeDtypeStruct((3,), F32), u, v,
                                                  vmap_method=method),
                   in_axes=(0, None))(a, X)
    jax.block_until_ready(out)
    theirs, seen[:] = list(seen), []
    ours = fnad.vmap(lambda u, v: fnad.pure_callback(inner, SDS, u, v, vmap_method=method),
                     in_axes=(0, None))(a, X)
    assert seen == theirs
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(out))


def test_vmap_under_jit_and_nested():
    f = fnad.jit(fnad.vmap(fnad.vmap(
        lambda u: fnad.pure_callback(np.cos, fnad.ShapeDtypeStruct((), F32), u,
                                     vmap_method="expand_dims"))))
    a = np.arange(12, dtype=F32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(f(a)), np.cos(a), rtol=1e-6)


def test_vmap_needs_a_method():
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        fnad.vmap(lambda u: fnad.pure_callback(np.sin, fnad.ShapeDtypeStruct((), F32), u))(X)
    with pytest.raises(ValueError, match="vmap_method must be None or one of"):
        fnad.pure_callback(np.sin, SDS, X, vmap_method="loop")


def test_grad_is_an_error_and_custom_jvp_gives_one():
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        fnad.grad(lambda x: fnad.pure_callback(np.sin, SDS, x).sum())(X)
    # a callback on an operand without a tangent is fine
    g = fnad.grad(lambda w, c: (w * fnad.pure_callback(np.cos, SDS, c)).sum())(X, X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X), rtol=1e-6)

    @fnad.custom_jvp
    def host_sin(x):
        return fnad.pure_callback(np.sin, SDS, x)

    @host_sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), fnad.pure_callback(np.cos, SDS, x) * t
    g = fnad.jit(fnad.grad(lambda x: host_sin(x).sum()))(X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X), rtol=1e-6)


def test_bad_results_are_named():
    with pytest.raises(ValueError, match=r"result 0 of <lambda> is float32\[4\], but "
                                         r"result_shape_dtypes says f32\[3\]"):
        fnad.pure_callback(lambda x: np.ones(4, F32), SDS, X)
    with pytest.raises(ValueError, match=r"result 0 of <lambda> is int32\[3\]"):
        fnad.pure_callback(lambda x: np.ones(3, np.int32), SDS, X)
    with pytest.raises(ValueError, match="returned a result structured as"):
        fnad.pure_callback(lambda x: [1.0, 2.0, 3.0], SDS, X)
    with pytest.raises(ValueError, match=r"result 0 of <lambda> is float32\[4\]"):
        fnad.jit(lambda x: fnad.pure_callback(lambda v: np.ones(4, F32), SDS, x))(X)
    # float64 where float32 is declared is what the value canonicalizes to: accepted
    assert fnad.pure_callback(lambda x: np.ones(3), SDS, X).dtype == np.float32
    with pytest.raises(TypeError, match="shape and a dtype"):
        fnad.pure_callback(np.sin, [3], X)
    with pytest.raises(TypeError, match="callback must be callable"):
        fnad.pure_callback("sin", SDS, X)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled"])
def test_sequential_vmap_under_jit(backend, method):
    """A lax.map (or unrolled calls) of the callback inside a jitted program, per backend."""
    if backend == "xla":
        pytest.importorskip("jax", reason="the xla backend needs jax")
    rows = np.arange(6, dtype=F32).reshape(2, 3)
    f = fnad.jit(fnad.vmap(lambda r: fnad.pure_callback(lambda v: np.asarray(v) * 2, SDS, r,
                                                        vmap_method=method)), backend=backend)
    np.testing.assert_array_equal(np.asarray(f(rows)), rows * 2)


# ---- io_callback ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_io_callback_runs_in_order_even_when_unused(backend):
    """Effects: kept by dead-code elimination under jit on every backend, called in program
    order with the values of that point, its result usable."""
    if backend == "xla":
        pytest.importorskip("jax", reason="the xla backend needs jax")
    from fnad.experimental import io_callback
    log = []

    def record(tag, x):
        log.append((tag, np.asarray(x).copy()))
        return np.asarray(x).sum(dtype=F32)

    def f(x):
        io_callback(lambda v: record("unused", v), fnad.ShapeDtypeStruct((), F32), x)
        y = jnp.sin(x)
        s = io_callback(lambda v: record("used", v), fnad.ShapeDtypeStruct((), F32), y,
                        ordered=True)
        return y * s
    got = fnad.jit(f, backend=backend)(X)
    np.testing.assert_allclose(got, np.sin(X) * np.sin(X).sum(), rtol=1e-6)
    assert [t for t, _ in log] == ["unused", "used"]
    np.testing.assert_allclose(log[0][1], X)
    np.testing.assert_allclose(log[1][1], np.sin(X), rtol=1e-6)
    eqns = fnad.make_jaxpr(f)(X).jaxpr.eqns
    assert sum(e.primitive.name == "io_callback" for e in eqns) == 2


def test_io_callback_vmap_grad_and_errors():
    from fnad.experimental import io_callback
    calls = []

    def host(v):
        calls.append(np.asarray(v).copy())
        return np.asarray(v) * 2

    def f(v, ordered=False):
        return io_callback(host, fnad.ShapeDtypeStruct(v.shape, v.dtype), v, ordered=ordered)
    xs = np.arange(6, dtype=F32).reshape(3, 2)
    np.testing.assert_allclose(fnad.vmap(f)(xs), xs * 2)          # one call per member
    assert len(calls) == 3 and all(c.shape == (2,) for c in calls)
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        fnad.vmap(lambda v: f(v, ordered=True))(xs)
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        fnad.grad(lambda v: f(v).sum())(xs[0])
    np.testing.assert_allclose(                      # no tangent reaches it: no error
        fnad.grad(lambda v: (v * f(fnad.lax.stop_gradient(v))).sum())(xs[1]), xs[1] * 2)
    with pytest.raises(ValueError, match="io_callback: result 0 of host is"):
        io_callback(host, fnad.ShapeDtypeStruct((3,), F32), xs[0])
    with pytest.raises(TypeError, match="io_callback: callback must be callable"):
        io_callback(3, fnad.ShapeDtypeStruct((), F32))
