"""fnad.jit: the compile cache, static arguments, compositions with every transformation,
disable_jit, log_compiles, lower(), and eager == jit on each backend."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad import lax

BACKENDS = ["numpy", "numba"]


def _close(a, b, tol=1e-6):
    fnad.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(
        np.asarray(x), np.asarray(y), rtol=tol, atol=tol), a, b)


def test_second_call_does_not_retrace():
    traces = []

    @fnad.jit
    def f(x, y):
        traces.append(1)                      # runs only while tracing
        return jnp.sin(x) * y
    x, y = jnp.ones(3), jnp.arange(3.0)
    f(x, y)
    f(x, y)
    f(x * 2.0, y + 1.0)                       # same avals: still cached
    assert len(traces) == 1 and f._cache_size() == 1
    f(jnp.ones(4), jnp.ones(4))               # new shape: a new trace
    f(np.ones(3, np.int32), y)                # new dtype
    f(x, 2.0)                                 # a weakly typed scalar
    assert len(traces) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_arguments_take_the_fast_path_keyed_by_tree_and_avals(backend, monkeypatch):
    """A second call with a pytree of Arrays skips the general path (`_entry`: every leaf
    abstracted into the cache key, then jit_p.bind); another tree or other avals, or a
    config change, do not reuse the entry, and the results are always the function's."""
    import sys
    jit_module = sys.modules["fnad.jit"]

    def g(params, x):
        return {k: v * x for k, v in params.items()}, x.sum()
    f = fnad.jit(g, backend=backend)
    params, x = {"a": jnp.ones(3), "b": jnp.arange(3.0)}, jnp.full(3, 2.0)
    f(params, x)
    general = []
    entry = jit_module.JitWrapped._entry
    monkeypatch.setattr(jit_module.JitWrapped, "_entry",
                        lambda self, *a: general.append(1) or entry(self, *a))
    for scale in (1.0, 3.0):
        out = f({k: v * scale for k, v in params.items()}, x)
        _close(out, g({k: v * scale for k, v in params.items()}, x))
    assert general == []                                  # both through the fast path
    other_tree = {"a": jnp.ones(3), "c": jnp.arange(3.0)}  # same avals, other keys
    _close(f(other_tree, x), g(other_tree, x))
    _close(f({"a": jnp.ones(3)}, x), g({"a": jnp.ones(3)}, x))        # fewer leaves
    wide = {"a": jnp.ones(4), "b": jnp.ones(4)}                          # other avals
    _close(f(wide, jnp.ones(4)), g(wide, jnp.ones(4)))
    assert len(general) == 3
    with fnad.config.override(jax_enable_x64=True):
        f(params, x)
    assert len(general) == 4
    f(params, x)                                          # back to the first entry
    assert len(general) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_arguments_and_keywords_take_the_fast_path(backend, monkeypatch):
    """Calls with static arguments or keywords skip the general path too, keyed by the
    static values and the keywords: another static value, another keyword or a keyword
    given positionally does not reuse an entry, and the results are the function's."""
    import sys
    jit_module = sys.modules["fnad.jit"]

    def g(x, n, scale=None, *, mode="add"):
        y = x * n if mode == "mul" else x + n
        return y if scale is None else y * scale
    f = fnad.jit(g, static_argnums=1, static_argnames="mode", backend=backend)
    x, s = jnp.arange(3.0), jnp.full(3, 2.0)
    calls = [((x, 2), {}), ((x, 2), {"scale": s}), ((x, 3), {"scale": s, "mode": "mul"})]
    for args, kwargs in calls:
        f(*args, **kwargs)
    general = []
    entry = jit_module.JitWrapped._entry
    monkeypatch.setattr(jit_module.JitWrapped, "_entry",
                        lambda self, *a: general.append(1) or entry(self, *a))
    for args, kwargs in calls:
        _close(f(*args, **kwargs), g(*args, **kwargs))
    assert general == []                                  # all through the fast path
    _close(f(x, 4, scale=s), g(x, 4, scale=s))                  # another static value
    _close(f(x, 2, s), g(x, 2, s))                              # scale given positionally
    _close(f(x, 3, scale=s, mode="add"), g(x, 3, scale=s, mode="add"))
    assert len(general) == 3
    with pytest.raises(TypeError, match="static argument 1 must be hashable"):
        f(x, [2])                                         # the general path's error


def test_cache_key_includes_tree_static_args_backend_and_config():
    traces = []

    def g(d, n):
        traces.append(n)
        return d["a"] * n
    f = fnad.jit(g, static_argnums=1)
    f({"a": jnp.ones(2)}, 2)
    f({"a": jnp.ones(2)}, 2)
    f({"a": jnp.ones(2)}, 3)
    assert traces == [2, 3]
    with fnad.config.override(jax_enable_x64=True):
        f({"a": jnp.ones(2)}, 3)
    assert traces == [2, 3, 3]
    assert fnad.jit(g, static_argnames="n")({"a": jnp.ones(2)}, n=5).tolist() == [5.0, 5.0]


def test_unhashable_static_arg_is_a_clear_error():
    f = fnad.jit(lambda x, shape: jnp.reshape(x, shape), static_argnums=1)
    with pytest.raises(TypeError, match="static argument 1 must be hashable.*list"):
        f(jnp.ones(4), [2, 2])
    assert f(jnp.ones(4), (2, 2)).shape == (2, 2)


def test_bad_backend_and_bad_function():
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        fnad.jit(lambda x: x, backend="nope")
    with pytest.raises(TypeError, match="expected a function"):
        fnad.jit(3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compositions(backend):
    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w) ** 2)
    jf = fnad.jit(f, backend=backend)
    x, w = jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)), jnp.float32), \
        jnp.asarray(np.random.default_rng(1).standard_normal((3, 2)), jnp.float32)
    _close(jf(x, w), f(x, w))
    _close(fnad.grad(jf, argnums=(0, 1))(x, w), fnad.grad(f, argnums=(0, 1))(x, w))
    _close(fnad.jit(fnad.grad(f), backend=backend)(x, w), fnad.grad(f)(x, w))
    _close(fnad.vmap(jf, in_axes=(0, None))(jnp.stack([x, -x]), w),
           jnp.stack([f(x, w), f(-x, w)]))
    _close(fnad.jit(fnad.vmap(f, in_axes=(0, None)), backend=backend)(jnp.stack([x, x]), w),
           jnp.stack([f(x, w), f(x, w)]))
    _close(fnad.jvp(jf, (x, w), (x, w)), fnad.jvp(f, (x, w), (x, w)))
    _close(fnad.hessian(jf)(x, w), fnad.hessian(f)(x, w), 1e-5)
    _close(fnad.jit(fnad.jit(f, backend=backend), backend=backend)(x, w), f(x, w))


def test_jit_is_a_primitive_in_the_jaxpr():
    f = fnad.jit(lambda x: jnp.sin(x) * 2.0, backend="numpy")
    text = str(fnad.make_jaxpr(lambda x: f(x) + 1.0)(jnp.ones(2)))
    assert "jit[backend='numpy' jaxpr={ lambda" in text and "sin" in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_control_flow_and_custom_rules_under_jit(backend):
    @fnad.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))
    softplus.defjvps(lambda t, ans, x: t * fnad.nn.sigmoid(x))

    def f(c, xs):
        c, ys = lax.scan(lambda c, x: (fnad.checkpoint(softplus)(c * x), c), c, xs)
        return lax.cond(jnp.sum(ys) > 0, lambda: jnp.sum(ys) + c, lambda: c - 1.0)
    xs = jnp.linspace(-1.0, 1.0, 5)
    jf = fnad.jit(f, backend=backend)
    _close(jf(0.5, xs), f(0.5, xs))
    _close(fnad.grad(jf)(0.5, xs), fnad.grad(f)(0.5, xs))
    n = fnad.jit(lambda x: lax.while_loop(lambda c: c < 100.0, lambda c: c * 3.0, x),
                 backend=backend)
    assert float(n(2.0)) == 162.0


def test_disable_jit_runs_the_python_function():
    seen = []

    @fnad.jit
    def f(x):
        seen.append(type(x).__name__)
        return x + 1
    with fnad.disable_jit():
        f(jnp.ones(2))
        f(jnp.ones(2))
    assert seen == ["Array", "Array"]        # concrete values, every call
    f(jnp.ones(2))
    assert "Array" not in seen[2:]


def test_log_compiles_says_why(caplog):
    f = fnad.jit(lambda x: x * 2.0)
    with fnad.config.override(jax_log_compiles=True), caplog.at_level(logging.WARNING,
                                                                      logger="fnad.jit"):
        f(jnp.ones(2))
        f(jnp.ones(2))
        f(jnp.ones(3))
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert "first call" in msgs[0] and "argument shapes/dtypes changed" in msgs[1]


def test_lower_shows_the_jaxpr():
    lowered = fnad.jit(lambda x: jnp.exp(x) + 1.0).lower(jnp.ones(3))
    text = lowered.as_text()
    assert "exp" in text and "f32[3]" in text
    program = lowered.compile().runtime_executable()       # the backend's, on raw buffers
    assert program(np.zeros(3, np.float32))[0].tolist() == [2.0, 2.0, 2.0]


def _aot_fun(x, n, scale=1.0):
    return {"y": x * n + scale, "n": n}


@pytest.mark.parametrize("backend", BACKENDS)
def test_ahead_of_time_stages(backend):
    """trace -> lower -> compile as in JAX: the Compiled is called without the static
    arguments, with the pytree and the types it was lowered for."""
    f = fnad.jit(_aot_fun, static_argnums=1, backend=backend)
    x = jnp.arange(3.0)
    traced = f.trace(x, 4, scale=2.0)
    assert "mul" in str(traced.jaxpr) and traced.fun_name == "_aot_fun"
    assert traced.in_avals[0][0].shape == (3,) and set(traced.in_avals[1]) == {"scale"}
    assert traced.out_info["y"].shape == (3,) and traced.out_info["y"].dtype == np.float32
    lowered = traced.lower()
    assert lowered.backend == backend and "_aot_fun" in lowered.as_text()
    compiled = lowered.compile()
    got = compiled(jnp.arange(3.0) + 1.0, scale=np.float32(0.5))
    want = f(jnp.arange(3.0) + 1.0, 4, scale=np.float32(0.5))
    _close(got, want)
    assert got["y"].tolist() == [4.5, 8.5, 12.5] and got["n"] == 4
    assert "mul" in compiled.as_text()
    with pytest.raises(TypeError, match="called with"):           # the static one again
        compiled(x, 4, scale=2.0)
    with pytest.raises(TypeError, match="structured as"):         # a keyword left out
        compiled(x)
    with pytest.raises(TypeError, match=r"argument 0 compiled for f32\[3\], called with "
                                        r"f32\[4\]"):
        compiled(jnp.ones(4), scale=2.0)
    with pytest.raises(TypeError, match="argument 1 compiled for f32"):
        compiled(x, scale=np.int32(2))
    assert f.eval_shape(x, 4, scale=2.0)["y"].shape == (3,)


def test_ahead_of_time_stages_match_jax():
    jax = pytest.importorskip("jax", reason="the oracle is jax")
    import jax.numpy as jjnp
    x = np.arange(3.0, dtype=np.float32)
    ours = fnad.jit(_aot_fun, static_argnums=1).lower(x, 4, scale=2.0).compile()
    theirs = jax.jit(_aot_fun, static_argnums=1).lower(jjnp.asarray(x), 4,
                                                        scale=2.0).compile()
    _close(ours(x + 1, scale=np.float32(3.0)), theirs(x + 1, scale=np.float32(3.0)))
    for bad in (lambda c: c(x, 4, scale=2.0), lambda c: c(x), lambda c: c(x[:2], scale=2.0)):
        with pytest.raises(TypeError):
            bad(ours)
        with pytest.raises(TypeError):
            bad(theirs)


def test_clear_caches_forgets_every_trace():
    traces = []

    @fnad.jit
    def f(x):
        traces.append(1)
        return x + 1.0
    g = fnad.jit(lambda x: f(x) * 2.0)
    x = jnp.ones(3)
    g(x)
    f(x)                                      # f's trace inside g's, at the same avals
    assert len(traces) == 1 and f._cache_size() == 1 and g._cache_size() == 1
    fnad.clear_caches()
    assert f._cache_size() == 0 and g._cache_size() == 0
    assert g(x).tolist() == [4.0, 4.0, 4.0] and len(traces) == 2    # traced again


def test_jit_backend_platform_and_device():
    x = jnp.ones(3)
    assert fnad.jit(lambda v: v + 1, backend="cpu").lower(x).backend == "numba"
    numpy_device = fnad.devices("numpy")[0]
    f = fnad.jit(lambda v: v + 1, device=numpy_device)
    assert f.lower(x).backend == "numpy" and f(x).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="backend= or device=, not both"):
        fnad.jit(lambda v: v, backend="numba", device=numpy_device)
    with pytest.raises(ValueError, match="unknown backend 'tpu2'.*platform"):
        fnad.jit(lambda v: v, backend="tpu2")


def test_eval_shape_and_methods():
    f = fnad.jit(lambda x: {"y": x.sum(0)})
    assert f.eval_shape(jnp.ones((2, 5)))["y"].shape == (5,)

    class M:
        scale = 3.0

        @fnad.jit
        def apply(self, x):
            return x * self.scale
    with pytest.raises(TypeError):
        M().apply(jnp.ones(2))                 # self is not an array: must be static
    g = fnad.jit(lambda self, x: x * self.scale, static_argnums=0)
    m = M()
    assert g(m, jnp.ones(2)).tolist() == [3.0, 3.0]


def test_closure_over_outer_tracer_is_not_cached():
    def outer(a):
        f = fnad.jit(lambda x: x * a)
        return f(jnp.ones(2)).sum()
    assert float(fnad.grad(outer)(2.0)) == 2.0
    assert float(fnad.grad(outer)(3.0)) == 2.0


def test_static_args_that_name_no_parameter_fail_when_jit_is_called():
    """As jax.jit: checked at jit(...) against the signature, not at the first call; a
    function taking *args / **kwargs accepts any."""
    def f(x, y):
        return x
    with pytest.raises(ValueError, match=r"invalid argnames \{'m'\} in static_argnames"):
        fnad.jit(f, static_argnames="m")
    with pytest.raises(ValueError, match=r"static_argnums=\(5,\), but only accepts 2 "):
        fnad.jit(f, static_argnums=5)
    with pytest.raises(ValueError, match=r"static_argnums=\(-3,\)"):
        fnad.jit(f, static_argnums=-3)
    fnad.jit(f, static_argnums=-1)
    fnad.jit(lambda x, *args, **kw: x, static_argnums=5, static_argnames="m")
