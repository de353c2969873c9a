"""fnad.experimental.sparse.bcoo_conv_general_dilated, sparse.linalg.lobpcg_standard and
CuSparseEfficiencyWarning against jax: conv values (1-D and 2-D, strides, padding,
dilations, groups, dimension numbers, sparse lhs / rhs / both) against jax.lax on the dense
operands, and jax's own sparse conv layout where jax supports it; gradients in the dense
operand and the sparse data against jax.grad; vmap against a loop; jit; sparsify; errors.
LOBPCG eigenvalues against numpy.linalg.eigh and jax's lobpcg_standard, for a matrix, a
callable and a BCOO, eagerly and under jit."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as fnp
from fnad import lax as flax
from fnad.experimental import sparse

jax = pytest.importorskip("jax", reason="jax is the oracle")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402
from jax.experimental.sparse import linalg as jlinalg  # noqa: E402


def _sparse_dense(shape, seed=0, density=0.4):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    return np.where(rng.uniform(size=shape) < density, x, 0).astype(np.float32)


def _operand(x, sparse_layout):
    """x as given (None) or as a BCOO with (n_batch, n_dense)."""
    if sparse_layout is None:
        return x
    n_batch, n_dense = sparse_layout
    return sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)


# (lhs shape, rhs shape, conv arguments): 1-D and 2-D, with every option in some case
CONV_CASES = {
    "1d-pad": ((1, 1, 9), (1, 1, 3), dict(window_strides=(1,), padding=[(1, 2)])),
    "1d-stride-dil-groups": ((2, 4, 11), (6, 2, 3), dict(
        window_strides=(2,), padding=[(2, -1)], lhs_dilation=(2,), rhs_dilation=(2,),
        feature_group_count=2)),
    "1d-nwc-same": ((2, 7, 3), (3, 3, 4), dict(window_strides=(2,), padding="SAME",
                                               dimension_numbers=("NWC", "WIO", "NWC"))),
    "2d-stride-dil": ((2, 3, 6, 5), (4, 3, 3, 2), dict(
        window_strides=(2, 1), padding=[(1, 1), (0, 2)], rhs_dilation=(1, 2))),
    "2d-batch-groups": ((4, 2, 5, 5), (4, 2, 2, 3), dict(
        window_strides=(1, 2), padding=[(0, 1), (1, 0)], lhs_dilation=(2, 1), batch_group_count=2,
        dimension_numbers=("NCHW", "OIHW", "NHWC"))),
}
# which operands are BCOO, and their (n_batch, n_dense)
LAYOUTS = {"lhs": ((0, 0), None), "rhs": (None, (1, 1)), "both": ((1, 0), (0, 1)),
           "neither": (None, None)}


@pytest.mark.parametrize("case,which", [(c, w) for c in CONV_CASES for w in LAYOUTS])
def test_conv_values_as_jax_lax(case, which):
    ls, rs, kw = CONV_CASES[case]
    x, k = _sparse_dense(ls, seed=1), _sparse_dense(rs, seed=2)
    lay_l, lay_r = LAYOUTS[which]
    out = sparse.bcoo_conv_general_dilated(_operand(x, lay_l), _operand(k, lay_r), **kw)
    want = np.asarray(jax.lax.conv_general_dilated(x, k, **kw))
    assert isinstance(out, sparse.BCOO) and out.shape == want.shape
    np.testing.assert_allclose(np.asarray(out.todense()), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", ["lhs", "rhs", "both"])
def test_conv_in_jax_case_stores_what_jax_stores(which):
    x, k = _sparse_dense((1, 1, 12), seed=3), _sparse_dense((1, 1, 4), seed=4)
    kw = dict(window_strides=(1,), padding=[(2, 1)])
    args = [sparse.BCOO.fromdense(x) if which in ("lhs", "both") else x,
            sparse.BCOO.fromdense(k) if which in ("rhs", "both") else k]
    jargs = [jsparse.BCOO((np.asarray(a.data), np.asarray(a.indices)), shape=a.shape)
             if isinstance(a, sparse.BCOO) else a for a in args]
    out = sparse.bcoo_conv_general_dilated(*args, **kw)
    J = jsparse.bcoo_conv_general_dilated(*jargs, **kw)
    assert (out.shape, out.n_batch, out.n_dense, out.nse) == (J.shape, J.n_batch, J.n_dense,
                                                             J.nse)
    # entry for entry the same products; jax keeps the data of pairs landing past the end
    # (ignored as padding), fnad zeroes every pair that lands outside
    inside = np.asarray(out.indices)[..., 0] < out.shape[-1]
    np.testing.assert_allclose(np.asarray(out.data)[inside], np.asarray(J.data)[inside],
                               rtol=1e-6)
    assert not np.any(np.asarray(out.data)[~inside])
    np.testing.assert_allclose(np.asarray(out.todense()), np.asarray(J.todense()),
                               rtol=1e-5, atol=1e-6)
    # under jit (traced operands) too
    got = traced(lambda *a: sparse.bcoo_conv_general_dilated(*a, **kw).todense())(*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(J.todense()), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("wrt", ["dense lhs", "dense rhs", "sparse lhs data",
                                 "sparse rhs data"])
def test_conv_grad_as_jax_grad(wrt):
    ls, rs, kw = CONV_CASES["1d-stride-dil-groups"] if wrt.startswith("dense") else \
        CONV_CASES["2d-stride-dil"]
    x, k = _sparse_dense(ls, seed=5), _sparse_dense(rs, seed=6)
    ct = np.random.default_rng(7).uniform(
        -1, 1, jax.lax.conv_general_dilated(x, k, **kw).shape).astype(np.float32)
    want_x, want_k = jax.grad(
        lambda a, b: jnp.sum(jax.lax.conv_general_dilated(a, b, **kw) * ct), (0, 1))(x, k)

    def loss(a, b):
        return fnp.sum(sparse.bcoo_conv_general_dilated(a, b, **kw).todense() * ct)
    if wrt == "dense lhs":
        got = fnad.grad(loss)(x, sparse.BCOO.fromdense(k))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want_x), rtol=1e-5, atol=1e-5)
    elif wrt == "dense rhs":
        got = fnad.grad(loss, 1)(sparse.BCOO.fromdense(x, n_batch=1), k)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want_k), rtol=1e-5, atol=1e-5)
    else:
        i = 0 if wrt == "sparse lhs data" else 1
        sp = sparse.BCOO.fromdense((x, k)[i])
        dense_want = np.asarray((want_x, want_k)[i])

        def of_data(data):
            a = sp._with_data(data)
            return loss(a, k) if i == 0 else loss(x, a)
        got = fnad.grad(of_data)(sp.data)
        want = dense_want[tuple(np.asarray(sp.indices).T)]
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mapped", ["dense lhs", "batched BCOO lhs", "BCOO rhs data"])
def test_conv_vmap_matches_loop(mapped):
    ls, rs, kw = CONV_CASES["2d-stride-dil"]
    xs = _sparse_dense((3, *ls), seed=8)
    ks = _sparse_dense((3, *rs), seed=9)

    def conv(a, b):
        return sparse.bcoo_conv_general_dilated(a, b, **kw).todense()
    if mapped == "dense lhs":
        K = sparse.BCOO.fromdense(ks[0])
        got = fnad.vmap(lambda a: conv(a, K))(xs)
        want = [conv(x, K) for x in xs]
    elif mapped == "batched BCOO lhs":
        got = fnad.vmap(lambda a: conv(a, ks[0]))(sparse.BCOO.fromdense(xs, n_batch=1))
        want = [conv(sparse.BCOO.fromdense(x), ks[0]) for x in xs]
    else:
        K = sparse.BCOO.fromdense(ks[0])
        datas = fnp.stack([K.data * (j + 1) for j in range(3)])
        got = fnad.vmap(lambda d: conv(xs[0], K._with_data(d)))(datas)
        want = [conv(xs[0], K._with_data(d)) for d in datas]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(w) for w in want]),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["1d-pad", "2d-batch-groups"])
def test_sparsify_conv_general_dilated(case):
    ls, rs, kw = CONV_CASES[case]
    x, k = _sparse_dense(ls, seed=10), _sparse_dense(rs, seed=11)
    out = sparse.sparsify(lambda a, b: flax.conv_general_dilated(a, b, **kw))(
        sparse.BCOO.fromdense(x), k)
    assert isinstance(out, sparse.BCOO)
    want = np.asarray(jax.lax.conv_general_dilated(x, k, **kw))
    np.testing.assert_allclose(np.asarray(out.todense()), want, rtol=1e-5, atol=1e-6)
    if case == "1d-pad":                       # jax's sparsify handles this case: same layout
        J = jsparse.sparsify(lambda a, b: jax.lax.conv_general_dilated(a, b, **kw))(
            jsparse.BCOO.fromdense(x), k)
        assert (out.n_batch, out.nse) == (J.n_batch, J.nse)


def test_conv_errors():
    x, k = _sparse_dense((1, 2, 6)), _sparse_dense((2, 2, 3))
    X = sparse.BCOO.fromdense(x)
    conv = sparse.bcoo_conv_general_dilated
    raises_with(lambda: conv(sparse.BCSR.fromdense(x[0]), k, window_strides=(1,),
                             padding="VALID"),
                "bcoo_conv_general_dilated", "lhs", "BCSR", exc=TypeError)
    raises_with(lambda: conv(X, k.astype(np.float16), window_strides=(1,), padding="VALID"),
                "same dtype")
    raises_with(lambda: conv(X, k, window_strides=(1,), padding="VALID",
                             feature_group_count=2),
                "feature_group_count", "rhs's input feature")
    raises_with(lambda: conv(X, k[0], window_strides=(1,), padding="VALID"), "same rank")
    raises_with(lambda: conv(X, k, window_strides=(1, 1), padding="VALID"),
                "window_strides", "spatial")


# ---- lobpcg_standard -----------------------------------------------------------------------
def _symmetric(n, seed):
    M = np.random.default_rng(seed).normal(size=(n, n))
    return (M @ M.T / n).astype(np.float32)


@pytest.mark.parametrize("form", ["matrix", "callable", "BCOO", "matrix under jit",
                                  "negative definite"])
def test_lobpcg_top_k_as_eigh_and_jax(form):
    n, k = 40, 3
    A = _symmetric(n, seed=12)
    if form == "negative definite":           # top eigenvalues < 0: no spurious 0 from a
        A = -A - 0.5 * np.eye(n, dtype=np.float32)   # dropped direction (jax converges too)
    X = np.random.default_rng(13).normal(size=(n, k)).astype(np.float32)
    if form in ("matrix", "negative definite"):
        theta, U, i = sparse.linalg.lobpcg_standard(A, X)
    elif form == "callable":
        theta, U, i = sparse.linalg.lobpcg_standard(lambda v: fnp.asarray(A) @ v, X)
    elif form == "BCOO":
        theta, U, i = sparse.linalg.lobpcg_standard(sparse.BCOO.fromdense(A), X)
    else:
        theta, U, i = fnad.jit(lambda a, x: sparse.linalg.lobpcg_standard(a, x, m=60))(A, X)
    theta, U = np.asarray(theta), np.asarray(U)
    want = np.linalg.eigvalsh(A.astype(np.float64))[::-1][:k]
    np.testing.assert_allclose(theta, want, rtol=1e-4)
    jtheta, _, _ = jlinalg.lobpcg_standard(jnp.asarray(A), jnp.asarray(X))
    np.testing.assert_allclose(theta, np.asarray(jtheta), rtol=1e-4)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-4)
    np.testing.assert_allclose(A @ U, U * theta, atol=1e-3)
    assert 0 < int(i) < (60 if form == "matrix under jit" else 100)     # converged early


def test_lobpcg_start_on_the_answer_of_a_negative_operator():
    """X spans the top eigenvectors already, so the residuals are dropped as zero columns;
    their Rayleigh-Ritz value must not beat the (negative) eigenvalues (jax: NaN here)."""
    n, k = 20, 2
    A = np.diag(-np.arange(1, n + 1, dtype=np.float32))
    theta, U, _ = sparse.linalg.lobpcg_standard(A, np.eye(n, k, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(theta), [-1, -2], rtol=1e-6)
    np.testing.assert_allclose(np.abs(np.asarray(U)), np.eye(n, k), atol=1e-6)


def test_lobpcg_errors():
    A = _symmetric(20, seed=14)
    X = np.ones((20, 2), np.float32)
    lob = sparse.linalg.lobpcg_standard
    raises_with(lambda: lob(A, np.ones((20, 4), np.float32)), "5 * k < n", exc=ValueError)
    raises_with(lambda: lob(A, np.ones((20, 0), np.float32)), "at least one column",
                exc=ValueError)
    raises_with(lambda: lob(A, np.ones(20, np.float32)), "[n, k]", exc=ValueError)
    raises_with(lambda: lob(A[:10], X), "[20, 20]", exc=ValueError)
    raises_with(lambda: lob(lambda v: v.astype(np.int32), X), "same dtype", exc=ValueError)
    raises_with(lambda: lob(A, X.astype(np.int32)), "floating", exc=ValueError)


def test_cusparse_warning_and_exported_names():
    assert issubclass(sparse.CuSparseEfficiencyWarning, sparse.SparseEfficiencyWarning)
    assert sparse.bcoo_conv_general_dilated is not None
    # every public name of jax's sparse package but the primitives and jax's internals
    not_in_fnad = {"SparseTracer", "api", "util"}
    missing = {name for name in dir(jsparse) if not name.startswith("_")
               and not name.endswith("_p") and name not in not_in_fnad} - set(dir(sparse))
    assert not missing, f"jax.experimental.sparse names fnad lacks: {sorted(missing)}"
