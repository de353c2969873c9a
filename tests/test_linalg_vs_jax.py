"""fnad.numpy.linalg, fnad.lax.linalg, fnad.numpy.fft and fnad.scipy.linalg against jax:
regression tests for mismatches found by differential testing (values, shapes, dtypes and
errors compared with jax at test time)."""
import numpy as np
import pytest

import fnad.lax_linalg as fll
import fnad.numpy as fnp
import fnad.scipy.linalg as fsl

jax = pytest.importorskip("jax", reason="jax is the oracle for these comparisons")
jnp = pytest.importorskip("jax.numpy", reason="jax is the oracle for these comparisons")
jll = pytest.importorskip("jax.lax.linalg", reason="jax is the oracle for these comparisons")
jsl = pytest.importorskip("jax.scipy.linalg", reason="jax is the oracle for these comparisons")

_M = [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]     # a list, not an array
_V = [1.0, 2.0, 3.0]


def _assert_same(want, got, rtol=1e-5, atol=1e-6):
    """Same dtype, shape and values for each output."""
    if isinstance(want, tuple | list):
        assert len(got) == len(want)
        for w, g in zip(want, got, strict=True):
            _assert_same(w, g, rtol, atol)
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# ---- lists are refused, as by jax (jax.numpy.linalg and lax.linalg) -------------------------
_LIST_CASES = {
    "numpy.linalg": [(n, (_M,)) for n in [
        "cholesky", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matrix_norm",
        "matrix_rank", "matrix_transpose", "norm", "pinv", "qr", "slogdet", "svd", "svdvals",
        "vector_norm"]] + [("solve", (_M, _V)), ("lstsq", (_M, _V)), ("cross", (_V, _V)),
                           ("outer", (_V, _V)), ("tensorsolve", (_M, _V)),
                           ("matrix_power", (_M, 2)), ("multi_dot", ([_M, _M],))],
    "scipy.linalg": [(n, (_V,)) for n in ["toeplitz", "hankel", "circulant", "fiedler",
                                           "companion", "fiedler_companion"]],
    "lax.linalg": [("tridiagonal_solve", (_V, _V, _V, _M)), ("hessenberg", (_M,)),
                   ("tridiagonal", (_M,)), ("lu_pivots_to_permutation", ([0, 1], 3))],
}


@pytest.mark.parametrize("module, name, args", [(mod, n, a) for mod, cases in
                                                _LIST_CASES.items() for n, a in cases])
def test_lists_are_refused_as_by_jax(module, name, args):
    jax_mod, fnad_mod = {"numpy.linalg": (jnp.linalg, fnp.linalg), "scipy.linalg": (jsl, fsl),
                         "lax.linalg": (jll, fll)}[module]
    with pytest.raises(TypeError):
        getattr(jax_mod, name)(*args)
    with pytest.raises(TypeError, match=rf"{name} requires ndarray or scalar arguments, got "
                                        "list at position 0"):
        getattr(fnad_mod, name)(*args)
    # the same values as arrays are fine
    if name == "multi_dot":
        arrays = ([fnp.asarray(_M)] * 2,)
    else:
        arrays = tuple(fnp.asarray(a) if isinstance(a, list) else a for a in args)
    if name == "lu_pivots_to_permutation":
        arrays = (fnp.asarray(np.array(args[0], np.int32)), args[1])
    getattr(fnad_mod, name)(*arrays)


# ---- lax.linalg.lu_pivots_to_permutation with no pivots: the identity ------------------------
@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_lu_pivots_to_permutation_of_no_pivots_is_the_identity(shape):
    pivots = np.zeros(shape, np.int32)
    want = jll.lu_pivots_to_permutation(pivots, 3)
    got = fll.lu_pivots_to_permutation(fnp.asarray(pivots), 3)
    _assert_same(want, got)


# ---- irfft / hfft / irfftn of an empty last axis: an empty result, as jax ---------------------
@pytest.mark.parametrize("func, shape, dtype, norm", [
    ("irfft", (0,), "complex64", None), ("irfft", (3, 0), "float32", "ortho"),
    ("hfft", (2, 0), "complex64", "forward"), ("irfftn", (2, 0), "complex64", None),
    ("irfft2", (2, 3, 0), "complex64", "ortho")])
def test_inverse_real_fft_of_an_empty_axis_is_empty(func, shape, dtype, norm):
    x = np.zeros(shape, dtype)
    want = getattr(jnp.fft, func)(x, norm=norm)
    got = getattr(fnp.fft, func)(fnp.asarray(x), norm=norm)
    _assert_same(want, got)


# ---- scipy.linalg.solve(assume_a='pos') broadcasts batch dims as 'gen' does ----------------------
@pytest.mark.parametrize("a_shape, b_shape", [((2, 3, 3), (1, 3, 2)), ((4, 1, 3, 3), (3, 2)),
                                              ((3, 3), (2, 3, 2)), ((1, 3, 3), (4, 3))])
def test_solve_pos_broadcasts_batch_dims(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a = rng.normal(size=a_shape)
    a = (a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)).astype(np.float32)
    b = rng.normal(size=b_shape).astype(np.float32)
    vector = len(b_shape) == len(a_shape) - 1
    # jax's 'pos' refuses these shapes (its matvec must keep b's shape); 'gen' gives the answer
    want = jnp.linalg.solve(a, b[..., None])[..., 0] if vector else jnp.linalg.solve(a, b)
    got = fsl.solve(fnp.asarray(a), fnp.asarray(b), assume_a="pos")
    _assert_same(want, got, rtol=1e-4, atol=1e-5)


def test_solve_pos_names_batch_dims_that_do_not_broadcast():
    a = fnp.broadcast_to(fnp.eye(3), (2, 3, 3))
    with pytest.raises(ValueError, match=r"batch dimensions of a \(2, 3, 3\) and b "
                                         r"\(4, 3, 1\) do not broadcast"):
        fsl.solve(a, fnp.ones((4, 3, 1)), assume_a="pos")


# ---- scipy.fft: idct of half-precision input, lists refused ------------------------------------
@pytest.mark.parametrize("func", ["idct", "idctn", "dct"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dct_of_half_precision_input_as_jax(func, dtype):
    jsf = pytest.importorskip("jax.scipy.fft", reason="jax is the oracle")
    import fnad.scipy.fft as fsf
    x = np.linspace(-1, 2, 6).reshape(2, 3).astype(dtype)
    want = getattr(jsf, func)(x, norm="ortho")
    got = getattr(fsf, func)(fnp.asarray(x), norm="ortho")
    _assert_same(want, got, rtol=1e-2, atol=1e-2)         # jax rounds to `dtype` on the way


@pytest.mark.parametrize("func", ["dct", "idct", "dctn", "idctn"])
def test_dct_refuses_lists_as_jax(func):
    jsf = pytest.importorskip("jax.scipy.fft", reason="jax is the oracle")
    import fnad.scipy.fft as fsf
    with pytest.raises(TypeError):
        getattr(jsf, func)([1.0, 2.0])
    with pytest.raises(TypeError, match=f"{func} requires ndarray or scalar arguments"):
        getattr(fsf, func)([1.0, 2.0])
