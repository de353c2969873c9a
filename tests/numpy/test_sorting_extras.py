"""fnad.numpy sorting, order statistics and extras: sort ... unique, quantile / median,
the nan-reductions, diff, roll, kron, cross, convolve, cov, interp, select.

NumPy is the reference for values, jax.numpy for JAX-only behaviour (static `size=`
padding, nanargmax of an all-NaN slice) and for gradients.
"""
import inspect
import warnings

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad.numpy import _extras, _sorting
from checks import traced

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # pragma: no cover
    jax = jjnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
RNG = np.random.default_rng(0)




def close(got, expected, atol=1e-5, rtol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(expected), (got.shape, np.shape(expected))
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)


def _np_quietly(f, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN slices
        warnings.simplefilter("ignore", DeprecationWarning)  # np.cross of 2-vectors
        return f(*args, **kw)


A = RNG.standard_normal((3, 5)).astype(np.float32)
A[1, 2] = np.nan
AI = RNG.integers(0, 4, (3, 6)).astype(np.int32)


# ---- sort, argsort, lexsort, partition -------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_sort_and_argsort_match_numpy(axis):
    close(jnp.sort(A, axis=axis), np.sort(A, axis=axis))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(AI, axis=axis)),
                                  np.argsort(AI, axis=axis, kind="stable"))
    close(jnp.sort(AI, axis=axis, descending=True), np.flip(np.sort(AI, axis=axis), axis=axis
                                                            if axis is not None else 0))


@needs_jax
def test_descending_argsort_is_stable_like_jax():
    np.testing.assert_array_equal(np.asarray(jnp.argsort(AI, axis=1, descending=True)),
                                  np.asarray(jjnp.argsort(AI, axis=1, descending=True)))


def test_lexsort_and_partition():
    np.testing.assert_array_equal(np.asarray(jnp.lexsort([AI[0], AI[1]])),
                                  np.lexsort([AI[0], AI[1]]))
    np.testing.assert_array_equal(np.asarray(jnp.lexsort(AI[:2])), np.lexsort(AI[:2]))
    b = RNG.standard_normal((4, 7)).astype(np.float32)
    p = np.asarray(jnp.partition(b, 3, axis=1))
    assert np.all(p[:, :3] <= p[:, 3:4]) and np.all(p[:, 4:] >= p[:, 3:4])
    close(p[:, 3], np.partition(b, 3, axis=1)[:, 3])
    ip = np.asarray(jnp.argpartition(b, 2, axis=0))
    close(np.take_along_axis(b, ip, 0)[2], np.partition(b, 2, axis=0)[2])
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.partition(b, 7)


@needs_jax
def test_sort_gradient_matches_jax():
    w = RNG.standard_normal((3, 5)).astype(np.float32)
    x = np.nan_to_num(A)
    g = fnad.grad(lambda x: jnp.sum(jnp.sort(x, axis=0) * w))(x)
    gj = jax.grad(lambda x: (jjnp.sort(x, axis=0) * w).sum())(x)
    close(g, gj)


# ---- searchsorted ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "compare_all", "sort"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy(method, side):
    s = np.sort(RNG.integers(0, 10, 12)).astype(np.float32)
    s[-1] = np.nan                                              # NaNs sort last
    q = np.array([[-1, 0, 3.5], [9, np.nan, 4], [10, 2, 2]], np.float32)
    got = jnp.searchsorted(s, q, side=side, method=method)
    np.testing.assert_array_equal(np.asarray(got), np.searchsorted(s, q, side=side))
    assert got.dtype == np.int32
    for n in [1, 2, 7, 8]:
        a = np.arange(n, dtype=np.int32)
        v = np.arange(-1, n + 1, dtype=np.int32)
        np.testing.assert_array_equal(np.asarray(jnp.searchsorted(a, v, side, method=method)),
                                      np.searchsorted(a, v, side))


def test_searchsorted_traced_and_sorter():
    a = np.array([1.0, 3.0, 5.0, 7.0], np.float32)
    v = np.array([0.0, 3.0, 6.0, 9.0], np.float32)
    np.testing.assert_array_equal(np.asarray(traced(jnp.searchsorted)(a, v)),
                                  np.searchsorted(a, v))
    perm = np.array([2, 0, 3, 1])
    shuffled = np.empty_like(a)
    shuffled[perm] = a
    np.testing.assert_array_equal(np.asarray(jnp.searchsorted(shuffled, v, sorter=perm)),
                                  np.searchsorted(shuffled, v, sorter=perm))
    assert jnp.searchsorted(np.zeros(0), v).shape == (4,)
    with pytest.raises(ValueError, match="side"):
        jnp.searchsorted(a, v, side="middle")


# ---- unique ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique_matches_numpy(axis):
    u = np.array([[3, 1, 1, 3], [2, 3, 3, 2], [3, 1, 1, 3]])
    got = jnp.unique(u, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    exp = np.unique(u, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    for g, e in zip(got, exp):
        np.testing.assert_array_equal(np.asarray(g), e)
    nan_in = np.array([3.0, np.nan, 1.0, np.nan], np.float32)
    close(jnp.unique(nan_in), np.unique(nan_in))


@needs_jax
@pytest.mark.parametrize("size, fill", [(6, None), (6, 9), (2, None)])
def test_unique_with_size_matches_jax_concrete_and_traced(size, fill):
    u = np.array([3, 1, 1, 2], np.int32)
    kw = dict(return_index=True, return_inverse=True, return_counts=True, size=size,
              fill_value=fill)
    exp = jjnp.unique(u, **kw)
    for got in (jnp.unique(u, **kw), traced(lambda u: jnp.unique(u, **kw))(u)):
        for g, e in zip(got, exp):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_unique_under_tracing_needs_size():
    with pytest.raises(fnad.ConcretizationTypeError, match="Pass a static `size=`"):
        traced(jnp.unique)(np.array([1, 2, 2], np.int32))
    with pytest.raises(ValueError, match="fill_value must be specified"):
        jnp.unique(np.zeros(0), size=2)


# ---- quantiles -------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_quantile_matches_numpy(method, axis, keepdims):
    b = RNG.standard_normal((4, 6, 3)).astype(np.float32)
    for q in [0.3, 0.5, np.array([0.0, 0.25, 0.5, 0.75, 1.0])]:
        close(jnp.quantile(b, q, axis=axis, method=method, keepdims=keepdims),
              np.quantile(b, q, axis=axis, method=method, keepdims=keepdims))
    close(jnp.percentile(b, [10, 90], axis=axis, method=method, keepdims=keepdims),
          np.percentile(b, [10, 90], axis=axis, method=method, keepdims=keepdims), atol=1e-4)


def test_median_and_nan_variants_match_numpy():
    close(jnp.median(A, axis=1), np.median(A, axis=1))           # NaN lane -> NaN
    close(jnp.median(np.arange(7)), np.median(np.arange(7)))
    close(jnp.median(A[0], keepdims=True), np.median(A[0], keepdims=True))
    close(jnp.nanmedian(A, axis=1), np.nanmedian(A, axis=1))
    close(jnp.nanquantile(A, [0.1, 0.9], axis=1), np.nanquantile(A, [0.1, 0.9], axis=1))
    close(jnp.nanpercentile(A, 50, axis=0), np.nanpercentile(A, 50, axis=0))
    all_nan = np.full((2, 3), np.nan, np.float32)
    close(jnp.nanmedian(all_nan, axis=1), [np.nan, np.nan])
    assert jnp.median(np.arange(4, dtype=np.int32)).dtype == np.float32
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        jnp.quantile(A, 1.5)


@needs_jax
def test_median_and_quantile_gradients_match_jax():
    b = RNG.standard_normal((4, 6)).astype(np.float32)
    close(fnad.grad(lambda x: jnp.sum(jnp.median(x, axis=1)))(b),
          jax.grad(lambda x: jjnp.median(x, axis=1).sum())(b))
    close(fnad.grad(lambda x: jnp.sum(jnp.quantile(x, np.array([0.2, 0.7]), axis=0)))(b),
          jax.grad(lambda x: jjnp.quantile(x, jjnp.array([0.2, 0.7]), axis=0).sum())(b))


# ---- nan reductions --------------------------------------------------------------------------
B = A.copy()
B[2, :] = np.nan


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanmax", "nanmin", "nanprod", "nanvar",
                                  "nanstd"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nan_reductions_match_numpy(name, axis):
    close(getattr(jnp, name)(B, axis=axis), _np_quietly(getattr(np, name), B, axis=axis),
          atol=1e-4)
    close(getattr(jnp, name)(B, axis=axis, keepdims=True),
          _np_quietly(getattr(np, name), B, axis=axis, keepdims=True), atol=1e-4)


def test_nan_reductions_options_and_int_inputs():
    close(jnp.nanvar(B, axis=1, ddof=1), _np_quietly(np.nanvar, B, axis=1, ddof=1))
    close(jnp.nanstd(B, axis=0, ddof=2), _np_quietly(np.nanstd, B, axis=0, ddof=2))
    close(jnp.nancumsum(B, axis=1), np.nancumsum(B, axis=1))
    close(jnp.nancumprod(B), np.nancumprod(B))
    close(jnp.nansum(AI, axis=0), np.nansum(AI, axis=0))
    close(jnp.nanmax(AI), np.nanmax(AI))
    close(jnp.nansum(B, axis=1, where=B > 0), np.nansum(B, axis=1, where=B > 0))


@needs_jax
@pytest.mark.parametrize("name", ["nanargmax", "nanargmin"])
def test_nanargmax_matches_jax(name):
    for axis in [None, 0, 1]:
        np.testing.assert_array_equal(np.asarray(getattr(jnp, name)(B, axis=axis)),
                                      np.asarray(getattr(jjnp, name)(B, axis=axis)))
    np.testing.assert_array_equal(np.asarray(getattr(jnp, name)(A, axis=1)),
                                  getattr(np, name)(A, axis=1))


@needs_jax
def test_nan_reduction_gradients_match_jax():
    for name in ["nansum", "nanmean", "nanmax", "nanvar"]:
        close(fnad.grad(lambda x: jnp.sum(getattr(jnp, name)(x, axis=1)))(A),
              jax.grad(lambda x: getattr(jjnp, name)(x, axis=1).sum())(A), atol=1e-4)


# ---- diff, ediff1d, roll ---------------------------------------------------------------------
C = RNG.integers(0, 9, (4, 5))


def test_diff_and_ediff1d_match_numpy():
    close(jnp.diff(C, axis=0), np.diff(C, axis=0))
    close(jnp.diff(C, n=2, prepend=1, append=C[:, :2]), np.diff(C, n=2, prepend=1, append=C[:, :2]))
    np.testing.assert_array_equal(np.asarray(jnp.diff(C > 3)), np.diff(C > 3))
    close(jnp.diff(C, n=0), C)
    close(jnp.ediff1d(C, to_begin=[-1, -2], to_end=9), np.ediff1d(C, to_begin=[-1, -2], to_end=9))
    with pytest.raises(ValueError, match="at least one dimensional"):
        jnp.diff(np.float32(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        jnp.diff(C, n=-1)


@pytest.mark.parametrize("shift, axis", [(2, None), (-7, 1), ((1, 2), (0, 1)), (3, (0, 1)),
                                         (13, 0), (0, 1), ((1, -1), 1)])
def test_roll_matches_numpy(shift, axis):
    close(jnp.roll(C, shift, axis), np.roll(C, shift, axis))


def test_roll_with_traced_shift():
    f = traced(lambda x, s: jnp.roll(x, s, axis=1))
    for s in [-7, -1, 0, 3, 12]:
        close(f(C.astype(np.float32), np.int32(s)), np.roll(C, s, axis=1))


# ---- kron, cross, convolve, cov, interp, select ----------------------------------------------
def test_kron_and_cross_match_numpy():
    close(jnp.kron(C[:2, :3], np.eye(2)), np.kron(C[:2, :3], np.eye(2)))
    close(jnp.kron(np.arange(3), C[:2]), np.kron(np.arange(3), C[:2]))
    u, v = RNG.standard_normal((2, 4, 3))
    close(jnp.cross(u, v), np.cross(u, v), atol=1e-5)
    close(jnp.cross(u[:, :2], v[:, :2]), _np_quietly(np.cross, u[:, :2], v[:, :2]), atol=1e-5)
    close(jnp.cross(u[:, :2], v), _np_quietly(np.cross, u[:, :2], v), atol=1e-5)
    close(jnp.cross(u.T, v.T, axis=0), np.cross(u.T, v.T, axis=0), atol=1e-5)
    with pytest.raises(ValueError, match="2 or 3"):
        jnp.cross(np.ones(4), np.ones(4))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n, m", [(7, 3), (6, 4), (3, 5), (4, 4), (1, 1)])
def test_convolve_and_correlate_match_numpy(mode, n, m):
    a = RNG.standard_normal(n).astype(np.float32)
    v = RNG.standard_normal(m).astype(np.float32)
    close(jnp.convolve(a, v, mode), np.convolve(a, v, mode), atol=1e-5)
    close(jnp.correlate(a, v, mode), np.correlate(a, v, mode), atol=1e-5)
    ac = (a + 1j * RNG.standard_normal(n)).astype(np.complex64)
    vc = (v - 2j * RNG.standard_normal(m)).astype(np.complex64)
    close(jnp.correlate(ac, vc, mode), np.correlate(ac, vc, mode), atol=1e-4)


def test_cov_and_corrcoef_match_numpy():
    X = RNG.standard_normal((3, 6)).astype(np.float32)
    close(jnp.cov(X), np.cov(X), atol=1e-5)
    close(jnp.cov(X, rowvar=False, bias=True), np.cov(X, rowvar=False, bias=True), atol=1e-5)
    fw = np.array([1, 2, 1, 3, 1, 1])
    aw = RNG.random(6).astype(np.float32)
    close(jnp.cov(X, fweights=fw, aweights=aw), np.cov(X, fweights=fw, aweights=aw), atol=1e-5)
    close(jnp.cov(X[0], X[1]), np.cov(X[0], X[1]), atol=1e-5)
    close(jnp.cov(X[0]), np.cov(X[0]), atol=1e-5)
    close(jnp.corrcoef(X), np.corrcoef(X), atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"left": -9.0, "right": 9.0}, {"period": 3.0}])
def test_interp_matches_numpy(kw):
    xp = np.array([0.0, 1.0, 2.5, 4.0])
    fp = np.array([1.0, 3.0, -1.0, 0.0])
    x = np.array([-1.0, 0.0, 0.5, 2.5, 3.0, 5.0])
    close(jnp.interp(x, xp, fp, **kw), np.interp(x, xp, fp, **kw))


def test_select_matches_numpy():
    x = np.arange(6)
    close(jnp.select([x < 2, x > 3], [x, x ** 2], default=-1),
          np.select([x < 2, x > 3], [x, x ** 2], default=-1))
    close(jnp.select([x < 3, x < 5], [x * 1.5, -x]), np.select([x < 3, x < 5], [x * 1.5, -x]))
    with pytest.raises(ValueError, match="same length"):
        jnp.select([x < 2], [x, x])


def test_public_names_are_exported():
    for mod in (_sorting, _extras):
        for name in mod.__all__:
            # (some are wrapped to also take typed PRNG keys: fnad/prng.py)
            assert inspect.unwrap(getattr(jnp, name)) is getattr(mod, name), name
