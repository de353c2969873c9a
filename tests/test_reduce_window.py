"""lax.reduce_window (pooling) against jax.lax: values over padding strings, strides and
dilations and non-identity init values; gradients of max- and average-pooling losses with
ties, NaNs and -inf; forward-mode derivatives where jax has no reverse mode (max with
window dilation or negative padding); vmap against a Python loop; jit on each backend; the
errors. The primitives themselves (values against a NumPy reference, JVPs, transposes,
vmap) are covered by tests/specs/spec_windowed.py through test_primitives.py and
test_batching.py."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import fnad
from fnad import lax

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
RNG = np.random.default_rng(0)
INIT = {"add": 0.0, "max": -np.inf, "min": np.inf}


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _relu_with_ties(*shape):
    """A ReLU's output: many all-zero windows, and one window of four equal values."""
    x = np.maximum(_normal(*shape), 0)
    x[0, :2, :2, :] = 0
    x[-1, 2:4, 2:4, 0] = 0.5
    return x


def _pool(lax_mod, op, x, dims, strides, padding, base=None, wdil=None, init=None):
    init = INIT[op] if init is None else init
    return lax_mod.reduce_window(x, init, getattr(lax_mod, op), dims, strides, padding, base,
                                 wdil)


CASES = {  # name: (operand shape, window_dimensions, window_strides, padding, base, wdil)
    "max-pool 2x2 stride 2": ((2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    "3x3 stride 2 SAME": ((2, 7, 6, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    "3x3 stride 2 SAME_LOWER": ((2, 6, 7, 3), (1, 3, 3, 1), (1, 2, 2, 1), "same_lower", None,
                                None),
    "stride 1 explicit": ((5, 7), (2, 3), (1, 1), ((1, 2), (0, 1)), None, None),
    "base dilation": ((4, 5), (3, 2), (2, 1), ((1, 1), (0, 0)), (2, 3), None),
    "window dilation SAME": ((7, 6), (2, 3), (1, 2), "SAME", None, (3, 2)),
    "negative padding": ((7, 6), (3, 2), (2, 2), ((-1, 2), (-2, -1)), None, None),
    "rank 1": ((9,), (4,), (3,), ((2, 1),), None, None),
}


@needs_jax
@pytest.mark.parametrize("op", ["add", "max", "min"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(name, op):
    shape, *params = CASES[name]
    x = _normal(*shape)
    np.testing.assert_allclose(_pool(lax, op, x, *params), _pool(jax.lax, op, x, *params),
                               rtol=1e-6, atol=1e-6)


@needs_jax
@pytest.mark.parametrize("op, init", [("add", 1.5), ("add", -2.0), ("max", 0.25),
                                      ("min", -0.5), ("max", np.float32(np.nan))])
def test_a_non_identity_init_value_is_combined_once_per_window_as_jax(op, init):
    """XLA folds init_value into each window once (pads and holes do not repeat it)."""
    for name in ["3x3 stride 2 SAME", "base dilation", "rank 1"]:
        shape, *params = CASES[name]
        x = _normal(*shape)
        np.testing.assert_allclose(_pool(lax, op, x, *params, init=init),
                                   _pool(jax.lax, op, x, *params, init=init), rtol=1e-6,
                                   atol=1e-6, err_msg=name)


def test_a_python_int_init_value_of_a_float_sum():
    """jax wants a float init_value here (a dtype error otherwise); an int that fits is fine."""
    x = _normal(5, 6)
    np.testing.assert_array_equal(lax.reduce_window(x, -2, lax.add, (2, 2), None, "SAME"),
                                  lax.reduce_window(x, -2.0, lax.add, (2, 2), None, "SAME"))


@needs_jax
def test_integers_match_jax():
    x = RNG.integers(-50, 50, (2, 6, 6, 3)).astype(np.int32)
    for op, init in [("add", 0), ("max", np.iinfo(np.int32).min), ("min", 7)]:
        ours = _pool(lax, op, x, (1, 3, 3, 1), (1, 2, 2, 1), "SAME", init=init)
        theirs = _pool(jax.lax, op, x, (1, 3, 3, 1), (1, 2, 2, 1), "SAME", init=init)
        assert np.asarray(ours).dtype == np.int32
        np.testing.assert_array_equal(ours, theirs)


def test_operator_add_and_identities_bind_the_primitive_alone():
    x = _normal(4, 5)
    for computation, init, prim in [(operator.add, 0, "reduce_window_sum"),
                                    (lax.max, -np.inf, "reduce_window_max"),
                                    (lax.min, np.inf, "reduce_window_min")]:
        jaxpr = fnad.make_jaxpr(lambda x: lax.reduce_window(x, init, computation, (2, 2),
                                                            (1, 1), "VALID"))(x)
        assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == [prim]
    ints = RNG.integers(-5, 5, (4, 5)).astype(np.int32)
    jaxpr = fnad.make_jaxpr(lambda x: lax.reduce_window(x, np.iinfo(np.int32).min, lax.max,
                                                        (2, 2), (1, 1), "VALID"))(ints)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["reduce_window_max"]


# ---- derivatives ----------------------------------------------------------------------------
def _max_pool_loss(lax_mod, x, w):
    return (_pool(lax_mod, "max", x, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * w).sum()


def _overlapping_max_pool_loss(lax_mod, x, w):           # windows share their borders
    return (_pool(lax_mod, "max", x, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") * w).sum()


def _avg_pool_loss(lax_mod, x, w):
    s = _pool(lax_mod, "add", x, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    return (s / 9.0 * w).sum()


def _min_pool_loss(lax_mod, x, w):
    return (_pool(lax_mod, "min", -x, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") * w).sum()


LOSSES = {"max pool": (_max_pool_loss, (2, 3, 3, 2)),
          "overlapping max pool": (_overlapping_max_pool_loss, (2, 3, 3, 2)),
          "average pool": (_avg_pool_loss, (2, 3, 3, 2)),
          "min pool": (_min_pool_loss, (2, 3, 3, 2))}


@needs_jax
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_with_ties_match_jax(name):
    """Ties (all-zero windows after a ReLU, four equal values) give the whole cotangent to
    the first element of the window in row-major order, as jax's select_and_scatter_add."""
    loss, w_shape = LOSSES[name]
    x, w = _relu_with_ties(2, 6, 6, 2), _normal(*w_shape)
    ours = fnad.grad(lambda x: loss(lax, x, w))(x)
    theirs = jax.grad(lambda x: loss(jax.lax, x, w))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    if name == "max pool":                             # one element per window gets it all
        assert np.count_nonzero(np.asarray(ours)[0, :2, :2, :]) == 2


@needs_jax
@pytest.mark.parametrize("op", ["max", "min"])
def test_gradients_through_nan_and_inf_match_jax(op):
    """A NaN never keeps the choice (x >= NaN is false), so the element after it replaces
    it; windows of -inf (or +inf for min) only keep the first."""
    inf = np.inf if op == "min" else -np.inf
    x = np.array([[1.0, np.nan, 0.5, 2.0, 3.0, np.nan, np.nan, 0.5, inf, inf, 1.0, np.nan],
                  [np.nan, 1.0, 0.5, 2.0, inf, inf, inf, 4.0, 1.0, 1.0, np.nan, 2.0]],
                 np.float32)
    w = _normal(2, 6)

    def loss(lax_mod, x):
        return (_pool(lax_mod, op, x, (1, 3), (1, 2), ((0, 0), (1, 0))) * w).sum()
    ours = fnad.grad(lambda x: loss(lax, x))(x)
    theirs = jax.grad(lambda x: loss(jax.lax, x))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


@needs_jax
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("params", [
    ((2, 2), (1, 1), "VALID", None, (2, 3)),              # window dilation
    ((2, 3), (2, 1), ((-1, 1), (-1, -1)), None, None),    # negative padding
    ((2, 2), (1, 1), ((1, 0), (0, 1)), (2, 2), (1, 2)),   # both dilations
], ids=["window-dilation", "negative-padding", "both-dilations"])
def test_forward_derivatives_where_jax_has_no_reverse_mode(op, params):
    """jax differentiates these max/min poolings in forward mode only; ours transposes too
    (tests/specs check our reverse mode by the dot-product test)."""
    x = _relu_with_ties(1, 6, 5, 1)[0, :, :, 0]
    t = _normal(6, 5)
    _, ours = fnad.jvp(lambda x: _pool(lax, op, x, *params), (x,), (t,))
    _, theirs = jax.jvp(lambda x: _pool(jax.lax, op, x, *params), (x,), (t,))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


@needs_jax
def test_forward_derivative_of_a_window_of_only_minus_inf():
    """The one place where jax's two modes disagree: its JVP keeps its init (-inf, tangent
    0) for a window of -inf values, its gradient picks the window's first element. Ours is
    one rule in both modes, its gradient's (docs/differences_from_jax.md)."""
    x, t = np.full(3, -np.inf, np.float32), np.array([1.0, 2.0, 3.0], np.float32)

    def f(lax_mod, x):
        return _pool(lax_mod, "max", x, (2,), (1,), "VALID")
    np.testing.assert_array_equal(fnad.jvp(lambda x: f(lax, x), (x,), (t,))[1], [1.0, 2.0])
    np.testing.assert_array_equal(jax.jvp(lambda x: f(jax.lax, x), (x,), (t,))[1], [0.0, 0.0])
    np.testing.assert_array_equal(fnad.grad(lambda x: f(lax, x).sum())(x),
                                  jax.grad(lambda x: f(jax.lax, x).sum())(x))


def test_gradient_of_the_init_value():
    """jax cannot differentiate init_value; we can: each window combines it once."""
    x = _normal(5, 6)
    g = fnad.grad(lambda c: lax.reduce_window(x, c, lax.add, (2, 2), (1, 1), "SAME").sum())(
        np.float32(1.0))
    assert float(g) == 30.0
    g = fnad.grad(lambda c: lax.reduce_window(x, c, lax.max, (2, 2), (1, 1), "SAME").sum())(
        np.float32(100.0))
    assert float(g) == 30.0                            # c wins every window


# ---- vmap and jit ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["add", "max", "min"])
@pytest.mark.parametrize("in_axis", [0, 1, -1])
def test_vmap_matches_a_python_loop(op, in_axis):
    xs = _normal(3, 4, 7, 6)
    xs = np.moveaxis(xs, 0, in_axis)

    def f(x):
        return _pool(lax, op, x, (2, 3, 2), (2, 1, 1), "SAME", (1, 2, 1), (1, 1, 2))
    got = fnad.vmap(f, in_axes=in_axis)(xs)
    want = np.stack([f(np.take(xs, i, axis=in_axis)) for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    g = fnad.vmap(fnad.grad(lambda x: (f(x) ** 2).sum()), in_axes=in_axis)(xs)
    want = np.stack([fnad.grad(lambda x: (f(x) ** 2).sum())(np.take(xs, i, axis=in_axis))
                     for i in range(3)])
    np.testing.assert_allclose(g, want, rtol=1e-6)


BACKENDS = ["numpy", "numba"] + (["xla"] if jax is not None else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_pooling_under_jit_matches_eager(backend):
    """A max-pool and an average-pool layer, value and gradient, compiled on each backend."""
    if backend == "numba":
        pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")
    x, w = _relu_with_ties(2, 6, 6, 2), _normal(2, 3, 3, 2)

    def loss(x):
        return _max_pool_loss(lax, x, w) + _avg_pool_loss(lax, x, w)
    want_v, want_g = fnad.value_and_grad(loss)(x)
    got_v, got_g = fnad.jit(fnad.value_and_grad(loss), backend=backend)(x)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-5, atol=1e-7)
    for op in ["add", "max", "min"]:
        for name, (shape, *params) in CASES.items():
            x = _normal(*shape)
            f = lambda x: _pool(lax, op, x, *params, init=0.5)  # noqa: E731
            np.testing.assert_allclose(fnad.jit(f, backend=backend)(x), f(x), rtol=1e-6,
                                       atol=1e-6, err_msg=f"{op} {name}")


# ---- padding strings and errors -------------------------------------------------------------
@needs_jax
def test_padtype_to_pads_matches_jax():
    for n, k, s in [(7, 3, 2), (6, 3, 2), (5, 1, 3), (4, 5, 1), (9, 4, 4)]:
        for kind in ["SAME", "SAME_LOWER", "VALID", "same"]:
            ours = lax.padtype_to_pads((n, 2), (k, 1), (s, 1), kind)
            theirs = jax.lax.padtype_to_pads((n, 2), (k, 1), (s, 1), kind)
            assert [tuple(p) for p in ours] == [tuple(p) for p in theirs]


def test_reduce_window_shape_tuple():
    assert lax.reduce_window_shape_tuple((7, 6), (3, 2), (2, 1), ((1, 1), (0, -1)),
                                         (1, 2), (1, 2)) == (4, 8)
    assert lax.reduce_window_shape_tuple((2,), (3,), (1,), ((0, 0),)) == (0,)


X = np.zeros((2, 6, 6, 3), np.float32)


@pytest.mark.parametrize("call, exc, message", [
    (lambda: lax.reduce_window(X, 0.0, lax.add, (2, 2), (1, 1), "VALID"), TypeError,
     "reduce_window: window_dimensions (2, 2) must have one entry per operand dimension: "
     "the operand has shape (2, 6, 6, 3) (rank 4)"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2, 2, 1), (1, 2), "VALID"), TypeError,
     "window_strides (1, 2) must have one entry per operand dimension"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 0, 2, 1), None, "VALID"), TypeError,
     "reduce_window: window_dimensions must be positive, got (1, 0, 2, 1)"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2, 2, 1), (1, 0, 2, 1), "SAME"), TypeError,
     "window_strides must be positive"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2, 2, 1), None, "VALID", (1, 1, 0, 1)),
     TypeError, "base_dilation must be positive"),
    (lambda: lax.reduce_window(X, 0.0, lax.max, (1, 2, 2, 1), None, "VALID", None, (1, -1)),
     TypeError, "window_dilation (1, -1) must have one entry per operand dimension"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2, 2, 1), None, ((0, 0), (1, 1))),
     TypeError, "padding ((0, 0), (1, 1)) must have one (low, high) pair per operand "
                "dimension"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2, 2, 1), None, ((0, 0, 1),) * 4),
     TypeError, "padding must be 'VALID', 'SAME', 'SAME_LOWER' or a sequence of (low, high) "
                "int pairs"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2, 2, 1), None, "FULL"), ValueError,
     "unknown padding 'FULL'"),
    (lambda: lax.reduce_window(X, 0.0, lax.add, (1, 2.5, 2, 1), None, "VALID"), TypeError,
     "reduce_window: window_dimensions must be a sequence of ints"),
    (lambda: lax.reduce_window(X, 1.0, "mul", (1, 2, 2, 1), None, "VALID"),
     TypeError, "computation must be a function of two arrays, got 'mul'"),
    (lambda: lax.reduce_window(X, 0.0, lambda a, b: (a + b).sum(), (1, 2, 2, 1), None,
                               "VALID"), TypeError,
     "computation must map two arrays of shape (2, 5, 5, 3) and dtype float32 to one of the "
     "same shape and dtype; it gave f32[]"),
    (lambda: lax.reduce_window((X, X), (0.0, 0.0), lax.add, (1, 2, 2, 1), None, "VALID"),
     NotImplementedError, "does not support pytrees of operands"),
    (lambda: lax.reduce_window(X, np.zeros(3, np.float32), lax.add, (1, 2, 2, 1), None,
                               "VALID"), TypeError, "init_value must be a scalar"),
    (lambda: lax.reduce_window(X, np.float16(1), lax.add, (1, 2, 2, 1), None, "VALID"),
     TypeError, "init_value has dtype float16 but the operand has dtype float32"),
    (lambda: lax.reduce_window(X.astype(np.int32), -np.inf, lax.max, (1, 2, 2, 1), None,
                               "VALID"), TypeError,
     "init_value -inf cannot be represented in the operand's dtype int32"),
    (lambda: lax.reduce_window(X.astype(bool), False, lax.add, (1, 2, 2, 1), None, "VALID"),
     TypeError, "reduce_window: does not accept dtype bool with lax.add"),
    (lambda: lax.reduce_window(X.astype(np.complex64), 0, lax.max, (1, 2, 2, 1), None,
                               "VALID"), TypeError,
     "reduce_window: does not accept dtype complex64 with lax.max"),
])
def test_errors_say_what_is_wrong(call, exc, message):
    with pytest.raises(exc) as info:
        call()
    assert message in str(info.value)


def test_the_primitive_checks_its_params_too():
    from fnad.primitives import windowed as win
    with pytest.raises(TypeError, match="reduce_window_max: window_strides must be positive"):
        win.reduce_window_max_p.bind(X, window_dimensions=(1, 2, 2, 1),
                                     window_strides=(1, 0, 1, 1), padding=((0, 0),) * 4,
                                     base_dilation=(1,) * 4, window_dilation=(1,) * 4)
    with pytest.raises(TypeError, match="reduce_window_sum: padding"):
        win.reduce_window_sum(X, (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0),))


GENERIC = {  # name: (computation, jax's, init)
    "product": (lax.mul, "mul", 1.0),
    "logaddexp": (lambda a, b: fnad.numpy.logaddexp(a, b),
                  lambda a, b: jnp.logaddexp(a, b), -np.inf),
    "product from 2": (lambda a, b: a * b, lambda a, b: a * b, 2.0),
    "not associative": (lambda a, b: a + 2.0 * b, lambda a, b: a + 2.0 * b, 0.5),
}


@needs_jax
@pytest.mark.parametrize("name", sorted(GENERIC))
@pytest.mark.parametrize("case", ["3x3 stride 2 SAME", "base dilation", "window dilation SAME",
                                  "negative padding"])
def test_other_computations_fold_the_windows_as_jax(name, case):
    """Any other computation folds each window's elements into init_value in row-major
    order, skipping pads and dilation holes, as XLA does (values and forward derivatives;
    jax has no reverse mode for these, fnad's follows from the fold)."""
    comp, jcomp, init = GENERIC[name]
    jcomp = getattr(jax.lax, jcomp) if isinstance(jcomp, str) else jcomp
    shape, dims, strides, padding, base, wdil = CASES[case]
    x = RNG.uniform(0.5, 1.5, shape).astype(np.float32)
    ours = lax.reduce_window(x, init, comp, dims, strides, padding, base, wdil)
    theirs = jax.lax.reduce_window(x, init, jcomp, dims, strides, padding, base, wdil)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    t = _normal(*shape)
    _, ours_t = fnad.jvp(lambda v: lax.reduce_window(v, init, comp, dims, strides, padding,
                                                     base, wdil), (x,), (t,))
    _, theirs_t = jax.jvp(lambda v: jax.lax.reduce_window(v, init, jcomp, dims, strides,
                                                          padding, base, wdil), (x,), (t,))
    np.testing.assert_allclose(ours_t, theirs_t, rtol=1e-4, atol=1e-5)


def test_product_pooling_gradient_matches_finite_differences():
    x = RNG.uniform(0.5, 1.5, (1, 5, 4, 2))
    with fnad.config.override(jax_enable_x64=True):
        def f(v):
            return lax.reduce_window(v, 1.0, lax.mul, (1, 2, 2, 1), (1, 2, 1, 1), "SAME").sum()
        g = np.asarray(fnad.grad(f)(x))
        eps, fd = 1e-6, np.zeros_like(x)
        for i in np.ndindex(x.shape):
            d = np.zeros_like(x)
            d[i] = eps
            fd[i] = (float(f(x + d)) - float(f(x - d))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


@needs_jax
def test_a_python_number_init_of_another_dtype_folds_in_the_operands_dtype():
    """A Python int init of an int8 product pooling is an int8 (it failed: int32 * int8)."""
    x = np.arange(1, 7, dtype=np.int8).reshape(2, 3)
    ours = lax.reduce_window(x, 1, lax.mul, (1, 2), (1, 1), "SAME")
    theirs = jax.lax.reduce_window(x, np.int8(1), jax.lax.mul, (1, 2), (1, 1), "SAME")
    assert ours.dtype == np.int8
    np.testing.assert_array_equal(ours, theirs)
