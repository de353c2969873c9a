"""BCOO shape operations and layout changes (fnad/experimental/sparse/_structure.py) and the
sparse-aware grad family (ad.py), against jax.experimental.sparse: the dense value and the
layout (n_batch, n_dense, nse) of every result, for every layout of a 4-d array; sparsify of
the shape primitives; jit and grad through them; errors."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad.experimental import sparse as fs

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle here")
from jax.experimental import sparse as js  # noqa: E402

RNG = np.random.default_rng(5)
X = RNG.standard_normal((2, 3, 4, 2)).astype(np.float32)
X[RNG.random(X.shape) < 0.5] = 0
LAYOUTS = [(0, 0), (1, 1), (2, 0)]

OPS = {
    "slice": lambda m, M: m.bcoo_slice(M, start_indices=(0, 1, 1, 0),
                                       limit_indices=(2, 3, 4, 2), strides=(1, 2, 1, 1)),
    "dynamic_slice": lambda m, M: m.bcoo_dynamic_slice(M, (1, 2, 0, 1), (1, 2, 3, 1)),
    "dynamic_slice clamped, negative": lambda m, M: m.bcoo_dynamic_slice(
        M, (5, -1, 3, 0), (1, 2, 3, 2)),
    "rev": lambda m, M: m.bcoo_rev(M, (0, 2, 3)),
    "concatenate batch dim": lambda m, M: m.bcoo_concatenate([M, M], dimension=0),
    "concatenate sparse dim": lambda m, M: m.bcoo_concatenate([M, M], dimension=2),
    "update_layout -> 0,0": lambda m, M: m.bcoo_update_layout(M, n_batch=0, n_dense=0,
                                                               on_inefficient=None),
    "update_layout -> 2,1": lambda m, M: m.bcoo_update_layout(M, n_batch=2, n_dense=1,
                                                               on_inefficient=None),
    "update_layout -> 0,2": lambda m, M: m.bcoo_update_layout(M, n_batch=0, n_dense=2,
                                                               on_inefficient=None),
}


def _dense_and_layout(mat):
    return np.asarray(mat.todense()), (mat.n_batch, mat.n_dense, mat.nse, mat.shape)


@pytest.mark.parametrize("layout", LAYOUTS, ids=[f"nb{a}-nd{b}" for a, b in LAYOUTS])
def test_ops_match_jax_value_and_layout(layout):
    J = js.BCOO.fromdense(X, n_batch=layout[0], n_dense=layout[1])
    F = fs.BCOO.fromdense(X, n_batch=layout[0], n_dense=layout[1])
    for name, op in OPS.items():
        want, want_layout = _dense_and_layout(op(js, J))
        got, got_layout = _dense_and_layout(op(fs, F))
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert got_layout == want_layout, name


def test_squeeze_reshape_broadcast_match_jax_and_dense():
    x = X[:1, :, :1]
    for layout in LAYOUTS:
        J, F = (m.BCOO.fromdense(x, n_batch=layout[0], n_dense=layout[1]) for m in (js, fs))
        want = js.bcoo_squeeze(J, dimensions=(0, 2))
        got = fs.bcoo_squeeze(F, dimensions=(0, 2))
        assert _dense_and_layout(got)[1] == _dense_and_layout(want)[1]
        np.testing.assert_array_equal(np.asarray(got.todense()), x[0, :, 0])
    for layout, new in (((0, 0), (6, 8)), ((2, 0), (6, 4, 2)), ((1, 1), (2, 12, 2)),
                        ((0, 1), (24, 2))):
        F = fs.BCOO.fromdense(X, n_batch=layout[0], n_dense=layout[1])
        got = fs.bcoo_reshape(F, new_sizes=new)
        np.testing.assert_array_equal(np.asarray(got.todense()), X.reshape(new))
        if layout == (0, 0):
            want = js.bcoo_reshape(js.BCOO.fromdense(X), new_sizes=new)
            assert _dense_and_layout(got)[1] == _dense_and_layout(want)[1]
    np.testing.assert_array_equal(np.asarray(fs.BCOO.fromdense(X).reshape(4, -1).todense()),
                                  X.reshape(4, -1))
    for layout in LAYOUTS:          # new leading dim: batch; new trailing: dense
        F = fs.BCOO.fromdense(X, n_batch=layout[0], n_dense=layout[1])
        got = fs.bcoo_broadcast_in_dim(F, shape=(5, 2, 3, 4, 2, 3),
                                       broadcast_dimensions=(1, 2, 3, 4))
        np.testing.assert_array_equal(np.asarray(got.todense()),
                                      np.broadcast_to(X[None, ..., None], got.shape))
        assert (got.n_batch, got.n_dense) == (layout[0] + 1, layout[1] + 1)
    J = js.BCOO.fromdense(X, n_batch=1, n_dense=1)
    want = js.bcoo_broadcast_in_dim(J, shape=(5, 2, 3, 4, 2), broadcast_dimensions=(1, 2, 3, 4))
    got = fs.bcoo_broadcast_in_dim(fs.BCOO.fromdense(X, n_batch=1, n_dense=1),
                                   shape=(5, 2, 3, 4, 2), broadcast_dimensions=(1, 2, 3, 4))
    assert _dense_and_layout(got)[1] == _dense_and_layout(want)[1]


def test_sparsify_jit_and_grad_through_shape_ops():
    F = fs.BCOO.fromdense(X[0], n_batch=0)

    def f(m):
        m = m[1:, ::2].reshape(-1)
        return fnp.concatenate([m, m[::-1]]) * 2.0

    out = fs.sparsify(f)(F)
    assert isinstance(out, fs.BCOO)
    want = np.concatenate([X[0, 1:, ::2].reshape(-1), X[0, 1:, ::2].reshape(-1)[::-1]]) * 2
    np.testing.assert_allclose(np.asarray(out.todense()), want)
    jitted = fnad.jit(lambda m, i: fs.bcoo_dynamic_slice(m, (i, 0, 0), (1, 4, 2)).todense())
    np.testing.assert_array_equal(np.asarray(jitted(F, 2)), X[0, 2:3])
    g = fnad.grad(lambda d: fs.bcoo_slice(F._with_data(d), start_indices=(1, 0, 0),
                                          limit_indices=(3, 4, 2)).todense().sum())(F.data)
    inside = np.asarray(F.indices)[:, 0] >= 1
    np.testing.assert_array_equal(np.asarray(g), np.where(inside, 1.0, 0.0))


@pytest.mark.parametrize("name", ["grad", "value_and_grad", "jacfwd", "jacrev", "jacobian"])
@pytest.mark.parametrize("argnums", [0, (0, 1)], ids=["argnums0", "argnums01"])
def test_sparse_ad_matches_jax(name, argnums):
    x = np.arange(6.0, dtype=np.float32)
    x[2] = 0
    y = np.arange(6.0, dtype=np.float32) + 1
    scalar = name in ("grad", "value_and_grad")

    def make(lib, jnp):
        return lambda X, y: jnp.sin(X @ y) if scalar else jnp.sin(X.todense() * y)
    want = getattr(js, name)(make(js, jax.numpy), argnums=argnums)(js.BCOO.fromdense(x), y)
    got = getattr(fs, name)(make(fs, fnp), argnums=argnums)(fs.BCOO.fromdense(x), y)

    def flat(tree, tu, cls):
        leaves = tu.tree_leaves(tree, is_leaf=lambda z: isinstance(z, cls))
        return [(type(z) is cls, np.asarray(z.todense() if isinstance(z, cls) else z))
                for z in leaves]
    for (gs, g), (ws, w) in zip(flat(got, fnad.tree_util, fs.BCOO),
                                flat(want, jax.tree_util, js.BCOO), strict=True):
        assert gs == ws
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_from_scipy_sparse():
    scipy_sparse = pytest.importorskip("scipy.sparse", reason="scipy not installed")
    m = scipy_sparse.random(5, 4, density=0.4, random_state=0, format="csr", dtype=np.float32)
    got = fs.BCOO.from_scipy_sparse(m)
    np.testing.assert_array_equal(np.asarray(got.todense()), m.toarray())
    want = js.BCOO.from_scipy_sparse(m)
    assert (got.nse, got.n_batch) == (want.nse, want.n_batch)
    batched = fs.BCOO.from_scipy_sparse(m, n_batch=1)
    assert batched.n_batch == 1
    np.testing.assert_array_equal(np.asarray(batched.todense()), m.toarray())


def test_errors_say_what_is_wrong():
    F = fs.BCOO.fromdense(X, n_batch=1, n_dense=1)
    with pytest.raises(fs.SparseEfficiencyError, match="increasing n_batch from 1 to 2"):
        fs.bcoo_update_layout(F, n_batch=2)
    with pytest.warns(fs.SparseEfficiencyWarning, match="increasing n_dense"):
        fs.bcoo_update_layout(F, n_dense=2, on_inefficient="warn")
    with pytest.raises(NotImplementedError, match="dense dims"):
        fs.bcoo_concatenate([F, F], dimension=3)
    with pytest.raises(ValueError, match="cannot mix batch and sparse"):
        fs.bcoo_reshape(F, new_sizes=(6, 4, 2))
    with pytest.raises(NotImplementedError, match="cannot grow"):
        fs.bcoo_broadcast_in_dim(fs.BCOO.fromdense(X[:, :1]), shape=(2, 3, 4, 2),
                                 broadcast_dimensions=(0, 1, 2, 3))
    with pytest.raises(ValueError, match="size 4, not 1"):
        fs.bcoo_squeeze(F, dimensions=(2,))
    with pytest.raises(ValueError, match="need 0 <= start <= limit"):
        fs.bcoo_slice(F, start_indices=(0, 0, 3, 0), limit_indices=(2, 3, 2, 2))


@pytest.mark.parametrize("kw", [dict(shape=(5, 6)),
                                dict(shape=(2, 5, 6, 3), n_batch=1, n_dense=1, nse=4),
                                dict(shape=(3, 4), nse=0.5, unique_indices=False,
                                     sorted_indices=True),
                                dict(shape=(4, 3), generator=fnad.random.normal,
                                     dtype=np.float32)],
                         ids=["default", "batch-dense", "fraction-sorted", "normal"])
def test_random_bcoo_is_jaxs_for_the_same_key(kw):
    jkw = dict(kw, generator=jax.random.normal) if "generator" in kw else kw
    want = js.random_bcoo(jax.random.PRNGKey(3), **jkw)
    got = fs.random_bcoo(fnad.random.PRNGKey(3), **kw)
    np.testing.assert_array_equal(np.asarray(got.indices), np.asarray(want.indices))
    if "generator" in kw:           # normal: erf_inv's last bits (fnad.random's table)
        np.testing.assert_allclose(np.asarray(got.data), np.asarray(want.data), rtol=1e-6)
    else:
        np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))
    with pytest.raises(ValueError, match="nse=30 must be in"):
        fs.random_bcoo(fnad.random.PRNGKey(0), (5, 6), nse=30)
