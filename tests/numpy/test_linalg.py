"""fnad.numpy.linalg: norm, solve, inv, det, slogdet, cholesky, matrix_power.

Values are checked against NumPy and jax.numpy.linalg, gradients (float64) against
jax.grad; every error a user can hit (non-square, mismatched shapes, integer operands
of the lax primitives, unsupported orders) has its type and message checked.
"""
import numpy as np
import pytest
from checks import rand, spd, well_conditioned

import fnad
import fnad.numpy as jnp
from fnad.core import ShapeError
from fnad.primitives import decompositions as dec

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # pragma: no cover
    jax = jjnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


# name -> (fnad function, jax function, argument makers)
FUNCS = {
    "det-2x2": (jnp.linalg.det, lambda: jjnp.linalg.det, [lambda d: well_conditioned((2, 2), d)]),
    "det-3x3-batched": (jnp.linalg.det, lambda: jjnp.linalg.det,
                        [lambda d: well_conditioned((2, 3, 3), d)]),
    "det-5x5": (jnp.linalg.det, lambda: jjnp.linalg.det, [lambda d: well_conditioned((5, 5), d)]),
    "det-batched-4x4": (jnp.linalg.det, lambda: jjnp.linalg.det,
                        [lambda d: well_conditioned((3, 4, 4), d)]),
    "slogdet": (jnp.linalg.slogdet, lambda: jjnp.linalg.slogdet,
                [lambda d: well_conditioned((4, 4), d)]),
    "slogdet-batched": (jnp.linalg.slogdet, lambda: jjnp.linalg.slogdet,
                        [lambda d: well_conditioned((2, 3, 3), d)]),
    "slogdet-negative-det": (jnp.linalg.slogdet, lambda: jjnp.linalg.slogdet,
                             [lambda d: -well_conditioned((3, 3), d)]),
    "inv": (jnp.linalg.inv, lambda: jjnp.linalg.inv, [lambda d: well_conditioned((4, 4), d)]),
    "inv-batched": (jnp.linalg.inv, lambda: jjnp.linalg.inv,
                    [lambda d: well_conditioned((2, 3, 3), d)]),
    "solve-vector": (jnp.linalg.solve, lambda: jjnp.linalg.solve,
                     [lambda d: well_conditioned((4, 4), d), lambda d: rand((4,), d, 5)]),
    "solve-matrix": (jnp.linalg.solve, lambda: jjnp.linalg.solve,
                     [lambda d: well_conditioned((4, 4), d), lambda d: rand((4, 2), d, 5)]),
    "solve-batched": (jnp.linalg.solve, lambda: jjnp.linalg.solve,
                      [lambda d: well_conditioned((2, 3, 3), d), lambda d: rand((2, 3, 2), d, 5)]),
    "solve-broadcast-b": (jnp.linalg.solve, lambda: jjnp.linalg.solve,
                          [lambda d: well_conditioned((2, 3, 3), d),
                           lambda d: rand((3, 1), d, 5)]),
    "solve-batched-vector-b": (jnp.linalg.solve, lambda: jjnp.linalg.solve,
                               [lambda d: well_conditioned((2, 3, 3), d),
                                lambda d: rand((3,), d, 5)]),
    "cholesky": (jnp.linalg.cholesky, lambda: jjnp.linalg.cholesky,
                 [lambda d: spd((4, 4), d)]),
    "cholesky-batched": (jnp.linalg.cholesky, lambda: jjnp.linalg.cholesky,
                         [lambda d: spd((2, 3, 3), d)]),
    "cholesky-upper": (lambda a: jnp.linalg.cholesky(a, upper=True),
                       lambda: lambda a: jjnp.linalg.cholesky(a, upper=True),
                       [lambda d: spd((3, 3), d)]),
    "matrix_power-3": (lambda a: jnp.linalg.matrix_power(a, 3),
                       lambda: lambda a: jjnp.linalg.matrix_power(a, 3),
                       [lambda d: rand((3, 3), d)]),
    "matrix_power-neg2": (lambda a: jnp.linalg.matrix_power(a, -2),
                          lambda: lambda a: jjnp.linalg.matrix_power(a, -2),
                          [lambda d: well_conditioned((3, 3), d)]),
    "matrix_power-0": (lambda a: jnp.linalg.matrix_power(a, 0),
                       lambda: lambda a: jjnp.linalg.matrix_power(a, 0),
                       [lambda d: rand((2, 3, 3), d)]),
}
DTYPES = [np.float32, np.complex64]


@needs_jax
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "complex64"])
@pytest.mark.parametrize("name", list(FUNCS))
def test_value_matches_jax(name, dtype):
    f, jf, makers = FUNCS[name]
    args = [m(dtype) for m in makers]
    ours = jax.tree_util.tree_leaves(f(*args))
    theirs = jax.tree_util.tree_leaves(jf()(*args))
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        o, t = np.asarray(o), np.asarray(t)
        assert o.dtype == t.dtype and o.shape == t.shape
        np.testing.assert_allclose(o, t, rtol=2e-4, atol=2e-5)


@needs_jax
@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "complex128"])
@pytest.mark.parametrize("name", list(FUNCS))
def test_gradient_matches_jax(name, dtype, x64):
    f, jf, makers = FUNCS[name]
    args = [_wide(m(dtype)) for m in makers]
    rng = np.random.default_rng(7)
    outs = jax.tree_util.tree_leaves(f(*args))
    weights = [rng.standard_normal(np.shape(o)) for o in outs]

    def scalar(fun, xp):
        def s(*xs):
            return sum(xp.sum(xp.real(o) * w) + xp.sum(xp.imag(o) * w)
                       for o, w in zip(jax.tree_util.tree_leaves(fun(*xs)), weights))
        return s
    argnums = tuple(range(len(args)))
    ours = fnad.grad(scalar(f, jnp), argnums=argnums)(*args)
    theirs = jax.grad(scalar(jf(), jjnp), argnums=argnums)(*[jjnp.asarray(a) for a in args])
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-7, atol=1e-9)


def test_values_match_numpy():
    a, b = well_conditioned((2, 4, 4), np.float64), rand((2, 4, 3), np.float64)
    np.testing.assert_allclose(jnp.linalg.solve(a, b), np.linalg.solve(a, b), rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.inv(a), np.linalg.inv(a), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jnp.linalg.det(a), np.linalg.det(a), rtol=1e-5)
    sign, logdet = jnp.linalg.slogdet(a)
    np.testing.assert_allclose(sign, np.linalg.slogdet(a)[0])
    np.testing.assert_allclose(logdet, np.linalg.slogdet(a)[1], rtol=1e-6)
    s = spd((3, 3), np.float64)
    np.testing.assert_allclose(jnp.linalg.cholesky(s), np.linalg.cholesky(s), rtol=1e-6)


def test_singular_matrix_det_and_slogdet():
    a = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0], [0.0, 1.0, 0.0, 1.0],
                  [1.0, 0.0, 1.0, 0.0]], np.float32)
    assert float(jnp.linalg.det(a)) == 0.0
    sign, logdet = jnp.linalg.slogdet(a)
    assert float(sign) == 0.0 and float(logdet) == -np.inf


def test_cholesky_of_indefinite_matrix_is_nan():
    out = np.asarray(jnp.linalg.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)))
    assert np.isnan(out[np.tril_indices(2)]).all() and out[0, 1] == 0   # as JAX: tril(NaNs)


def test_integer_input_is_promoted_as_jax():
    a = np.array([[4, 1], [1, 3]], np.int32)
    assert jnp.linalg.det(a).dtype == np.float32
    np.testing.assert_allclose(jnp.linalg.inv(a), np.linalg.inv(a), rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.cholesky(a), np.linalg.cholesky(a), rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.norm(np.arange(4)), np.linalg.norm(np.arange(4)))


def test_traces_to_the_decomposition_primitives():
    a, b = well_conditioned((2, 4, 4)), rand((2, 4, 3))
    shape = fnad.eval_shape(jnp.linalg.solve, a, b)
    assert (shape.shape, shape.dtype) == ((2, 4, 3), np.float32)
    names = {e.primitive.name for e in fnad.make_jaxpr(jnp.linalg.solve)(a, b).jaxpr.eqns}
    assert {"lu", "triangular_solve"} <= names
    names = {e.primitive.name for e in fnad.make_jaxpr(jnp.linalg.cholesky)(a).jaxpr.eqns}
    assert "cholesky" in names


# ---- norm --------------------------------------------------------------------------------
NORM_CASES = [
    ((5,), None, None), ((5,), 1, None), ((5,), 2, None), ((5,), np.inf, None),
    ((5,), -np.inf, None), ((5,), 0, None), ((5,), 3, None), ((5,), -1, None),
    ((5,), 0.5, None),
    ((3, 4), None, None), ((3, 4), "fro", None), ((3, 4), 1, None), ((3, 4), -1, None),
    ((3, 4), np.inf, None), ((3, 4), -np.inf, None),
    ((2, 3, 4), None, None), ((2, 3, 4), None, 1), ((2, 3, 4), 1, -1), ((2, 3, 4), 2, 0),
    ((2, 3, 4), np.inf, 2), ((2, 3, 4), "fro", (1, 2)), ((2, 3, 4), 1, (0, 2)),
    ((2, 3, 4), 1, (2, 0)), ((2, 3, 4), -1, (1, 2)), ((2, 3, 4), np.inf, (2, 1)),
    ((2, 3, 4), -np.inf, (0, 1)),
]
DIFF_NORM_CASES = [c for c in NORM_CASES if c[1] != 0]   # ord=0 counts nonzeros: no gradient


@needs_jax
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "complex64"])
@pytest.mark.parametrize("shape,ord,axis", NORM_CASES, ids=[str(c) for c in NORM_CASES])
def test_norm_value_matches_jax(shape, ord, axis, dtype, keepdims):
    x = rand(shape, dtype)
    ours = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    theirs = jjnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    assert np.shape(ours) == np.shape(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    if dtype == np.float32:
        np.testing.assert_allclose(ours, np.linalg.norm(x, ord=ord, axis=axis,
                                                        keepdims=keepdims), rtol=1e-5)


@needs_jax
@pytest.mark.parametrize("at_zero", [False, True], ids=["random", "zero"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "complex128"])
@pytest.mark.parametrize("shape,ord,axis", DIFF_NORM_CASES, ids=[str(c) for c in DIFF_NORM_CASES])
def test_norm_gradient_matches_jax(shape, ord, axis, dtype, at_zero, x64):
    """Including at x = 0, where jax's gradient is NaN for some orders and finite for others:
    the same formulas give the same answer."""
    x = np.zeros(shape, dtype) if at_zero else _wide(rand(shape, dtype))
    x = _wide(x)
    w = np.random.default_rng(1).standard_normal(
        np.shape(np.linalg.norm(np.abs(x) + 1, ord=ord, axis=axis)))

    def s(xp):
        return lambda v: xp.sum(xp.linalg.norm(v, ord=ord, axis=axis) * w)
    ours = np.asarray(fnad.grad(s(jnp))(x))
    theirs = np.asarray(jax.grad(s(jjnp))(jjnp.asarray(x)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9, equal_nan=True)


# ---- errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("fun", [jnp.linalg.det, jnp.linalg.slogdet, jnp.linalg.inv,
                                 jnp.linalg.cholesky, lambda a: jnp.linalg.matrix_power(a, 2)],
                         ids=["det", "slogdet", "inv", "cholesky", "matrix_power"])
def test_non_square_matrix_is_an_error(fun):
    with pytest.raises(ValueError, match=r"square matri.*\[\.\.\., n, n\].*\(2, 3\)"):
        fun(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="square matri"):
        fun(np.ones((3,), np.float32))


def test_solve_shape_errors():
    a = well_conditioned((3, 3))
    with pytest.raises(ValueError, match=r"incompatible shapes a \(3, 3\) and b \(4,\)"):
        jnp.linalg.solve(a, np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"incompatible shapes a \(3, 3\) and b \(4, 2\)"):
        jnp.linalg.solve(a, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="at least two dimensional"):
        jnp.linalg.solve(np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="batch of vectors"):
        jnp.linalg.solve(np.ones((2, 3, 3), np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="do not broadcast"):
        jnp.linalg.solve(np.ones((2, 3, 3), np.float32), np.ones((4, 3, 1), np.float32))
    with pytest.raises(TypeError, match="exponent must be an integer"):
        jnp.linalg.matrix_power(a, 1.5)


def test_integer_operands_of_the_primitives_are_errors():
    i = np.eye(3, dtype=np.int32)
    # (cholesky's default symmetrization (x + xᴴ)/2 makes an int matrix float32, as jax's)
    for fun in (lambda x: dec.cholesky(x, symmetrize_input=False), dec.lu,
                lambda x: dec.triangular_solve(x, x)):
        with pytest.raises(ShapeError, match="does not accept dtype int32"):
            fun(i)


def test_primitive_shape_errors():
    with pytest.raises(ShapeError, match=r"cholesky.*square matrices.*\(2, 3\)"):
        dec.cholesky(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError, match=r"lu.*rank >= 2.*\(3,\)"):
        dec.lu(np.ones(3, np.float32))
    with pytest.raises(ShapeError, match=r"triangular_solve.*incompatible shapes"):
        dec.triangular_solve(np.eye(3, dtype=np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(ShapeError, match=r"triangular_solve.*same dtype.*float32 and complex64"):
        dec.triangular_solve(np.eye(3, dtype=np.float32), np.ones((3, 3), np.complex64),
                             left_side=True)
    with pytest.raises(ShapeError, match=r"triangular_solve.*batch dimensions"):
        dec.triangular_solve(np.ones((2, 3, 3), np.float32), np.ones((4, 3, 3), np.float32))


def test_norm_errors():
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="Invalid axis values"):
        jnp.linalg.norm(x, ord=1)
    with pytest.raises(ValueError, match="Invalid order 'inf' for vector norm"):
        jnp.linalg.norm(x, ord="inf", axis=0)
    with pytest.raises(ValueError, match="Invalid order 'bad' for matrix norm"):
        jnp.linalg.norm(x, ord="bad", axis=(0, 1))
    with pytest.raises(NotImplementedError, match="method='qr' not implemented for complex"):
        jnp.linalg.slogdet(np.eye(2, dtype=np.complex64), method="qr")


def test_norms_from_singular_values_and_slogdet_by_qr_match_numpy():
    x = rand((2, 3, 4), np.float64)                    # (more in test_linalg_decompositions.py)
    for ord in ("nuc", 2, -2):
        np.testing.assert_allclose(jnp.linalg.norm(x, ord=ord, axis=(1, 2)),
                                   np.linalg.norm(x, ord=ord, axis=(1, 2)), rtol=1e-6)
    a = well_conditioned((3, 3), np.float64)
    sign, logdet = jnp.linalg.slogdet(a, method="qr")
    np.testing.assert_allclose([sign, logdet], np.linalg.slogdet(a), rtol=1e-6)
