"""fnad.experimental.sparse (BCOO) against jax.experimental.sparse: fromdense/todense for
several layouts, padding, dot_general both ways with gradients, the operators, transpose,
sum, products, sum_duplicates / sort_indices, vmap over batched BCOO against a loop, jit,
empty / eye and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as fnp
from fnad.core import ConcretizationTypeError
from fnad.experimental import sparse

jax = pytest.importorskip("jax", reason="jax is the oracle")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402


def _sparse_dense(shape, seed=0, density=0.4):
    """A float32 array with about `density` of its elements nonzero."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    return np.where(rng.uniform(size=shape) < density, x, 0).astype(np.float32)


def _to_jax(A):
    return jsparse.BCOO((np.asarray(A.data), np.asarray(A.indices)), shape=A.shape)


def _np_extract(A, dense):
    """dense's elements (blocks) at A's indices, 0 at padding: A.data's shape (a NumPy
    oracle for the gradient in data of a function of A.todense())."""
    dense, idx = np.asarray(dense), np.asarray(A.indices)
    nb, ns = A.n_batch, A.n_sparse
    B = A.shape[:nb]
    idx = np.broadcast_to(idx, (*B, *idx.shape[nb:]))
    inside = np.all(idx < np.asarray(A.shape[nb:nb + ns]), axis=-1)         # [*B, nse]
    safe = np.where(inside[..., None], idx, 0)
    grid = np.meshgrid(*(np.arange(b) for b in B), indexing="ij")
    got = dense[(*(g[..., None] for g in grid), *(safe[..., j] for j in range(ns)))]
    return np.where(inside.reshape(inside.shape + (1,) * A.n_dense), got, 0)


def _same_bcoo(A, J):
    """fnad BCOO A stores exactly what jax BCOO J stores."""
    assert A.shape == J.shape and (A.n_batch, A.n_dense, A.nse) == (J.n_batch, J.n_dense, J.nse)
    np.testing.assert_array_equal(np.asarray(A.indices), np.asarray(J.indices))
    np.testing.assert_allclose(np.asarray(A.data), np.asarray(J.data), rtol=1e-6)


@pytest.mark.parametrize("n_batch,n_dense", [(0, 0), (0, 1), (1, 1), (2, 0)])
def test_fromdense_todense_round_trip_and_padding_as_jax(n_batch, n_dense):
    M = _sparse_dense((2, 3, 4, 3), seed=n_batch * 3 + n_dense)
    M[0, 0] = 0                               # a batch entry with fewer nonzeros
    A = sparse.BCOO.fromdense(M, n_batch=n_batch, n_dense=n_dense)
    assert A.indices_sorted and A.unique_indices and A.indices.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(A.todense()), M)
    # a larger nse pads (data 0, indices = the sparse shape): jax's layout, entry for entry
    P = sparse.bcoo_fromdense(M, nse=A.nse + 3, n_batch=n_batch, n_dense=n_dense)
    J = jsparse.bcoo_fromdense(M, nse=A.nse + 3, n_batch=n_batch, n_dense=n_dense)
    _same_bcoo(P, J)
    assert repr(P) == repr(J)
    np.testing.assert_array_equal(np.asarray(P.todense()), M)
    np.testing.assert_array_equal(np.asarray(A.indices), np.asarray(J.indices)[..., :A.nse, :])
    # a smaller one keeps the first entries
    S = sparse.bcoo_fromdense(M, nse=A.nse - 2, n_batch=n_batch, n_dense=n_dense)
    np.testing.assert_array_equal(np.asarray(S.data), np.asarray(J.data)[..., :A.nse - 2, :]
                                  if n_dense else np.asarray(J.data)[..., :A.nse - 2])


# (sparse shape, n_batch, n_dense, dense shape, dimension_numbers with the sparse one as lhs)
DOT_CASES = {
    "matvec": ((5, 4), 0, 0, (4,), (([1], [0]), ([], []))),
    "matmat": ((5, 4), 0, 0, (4, 3), (([1], [0]), ([], []))),
    "contract_rows": ((5, 4), 0, 0, (5, 3), (([0], [0]), ([], []))),
    "batched": ((2, 5, 4), 1, 0, (2, 4, 3), (([2], [1]), ([0], [0]))),
    "free_batch": ((2, 5, 4), 1, 0, (4, 3), (([2], [0]), ([], []))),
    "contract_batch": ((2, 5, 4), 1, 0, (2, 3), (([0], [0]), ([], []))),
    "dense_block": ((5, 4, 2), 0, 1, (4, 3), (([1], [0]), ([], []))),
    "all_sparse_contracted": ((3, 4), 0, 0, (3, 4, 2), (([0, 1], [0, 1]), ([], []))),
}


@pytest.mark.parametrize("side", ["sparse_lhs", "sparse_rhs"])
@pytest.mark.parametrize("case", list(DOT_CASES))
def test_dot_general_values_and_grads_match_jax(case, side):
    """Values and gradients (in data and in the dense operand) against jax's dense
    dot_general and its jax.grad; the gradient in data is the dense one at the stored
    indices (0 at padding)."""
    sp_shape, n_batch, n_dense, x_shape, dn = DOT_CASES[case]
    M = _sparse_dense(sp_shape, seed=1)
    x = np.random.default_rng(2).uniform(-1, 1, x_shape).astype(np.float32)
    nse = int(np.max((M != 0).reshape(*sp_shape[:n_batch], -1).sum(-1))) + 2   # with padding
    A = sparse.BCOO.fromdense(M, nse=nse, n_batch=n_batch, n_dense=n_dense)
    if side == "sparse_rhs":
        dn = ((dn[0][1], dn[0][0]), (dn[1][1], dn[1][0]))
    w = np.random.default_rng(3).uniform(-1, 1, 64).astype(np.float32)
    order = (lambda s, x: (s, x)) if side == "sparse_lhs" else (lambda s, x: (x, s))

    def loss(d, x):
        out = sparse.bcoo_dot_general(*order(A._with_data(d), x), dimension_numbers=dn)
        return (out * w[:out.size].reshape(out.shape)).sum(), out

    def jax_loss(m, x):
        out = jax.lax.dot_general(*order(m, x), dn)
        return (out * w[:out.size].reshape(out.shape)).sum(), out

    (_, out), (g_data, g_x) = fnad.value_and_grad(loss, (0, 1), has_aux=True)(A.data, x)
    (_, want), (g_m, want_x) = jax.value_and_grad(jax_loss, (0, 1), has_aux=True)(M, x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g_x), np.asarray(want_x), rtol=1e-5, atol=1e-6)
    want_data = _np_extract(A, g_m)
    np.testing.assert_allclose(np.asarray(g_data), np.asarray(want_data), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_batch", [0, 1])
def test_matmul_operators_against_dense(n_batch):
    M = _sparse_dense((2, 5, 4), seed=4)
    A = sparse.BCOO.fromdense(M, n_batch=n_batch)
    rng = np.random.default_rng(5)
    v, u, X, Y, XB = (rng.uniform(-1, 1, s).astype(np.float32)
                      for s in [(4,), (5,), (4, 3), (3, 5), (2, 4, 3)])
    cases = [(A @ v, M @ v), (A @ X, M @ X), (A @ fnp.asarray(X), M @ X), (u @ A, u @ M),
             (Y @ A, Y @ M), (fnp.asarray(Y) @ A, Y @ M)]
    if n_batch:
        cases += [(A @ XB, M @ XB), (np.swapaxes(XB, 1, 2) @ A.transpose((0, 2, 1)),
                                     np.swapaxes(XB, 1, 2) @ np.swapaxes(M, 1, 2))]
    for got, want in cases:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    A2 = sparse.BCOO.fromdense(M[0])
    np.testing.assert_allclose(np.asarray(v[None] @ A2.T), v[None] @ M[0].T, rtol=1e-5)


def test_grad_of_matmul_sum_wrt_data_and_x_matches_jax():
    M = _sparse_dense((6, 5), seed=6)
    x = np.random.default_rng(7).uniform(-1, 1, (5, 2)).astype(np.float32)
    A = sparse.BCOO.fromdense(M, nse=12)
    J = jsparse.BCOO.fromdense(M, nse=12)
    np.testing.assert_allclose(np.asarray(A @ x), np.asarray(J @ x), rtol=1e-5, atol=1e-6)
    f = lambda mk: lambda d, x: jnp.sum(jnp.sin(mk((d, A.indices), shape=M.shape) @ x))
    g = fnad.grad(lambda d, x: fnp.sum(fnp.sin(sparse.BCOO((d, A.indices), shape=M.shape) @ x)),
                  argnums=(0, 1))(A.data, x)
    jg = jax.grad(f(jsparse.BCOO), argnums=(0, 1))(J.data, x)
    for a, b in zip(g, jg):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    # through fromdense: the gradient in the dense matrix is nonzero only at stored entries
    gm = fnad.grad(lambda m: (sparse.BCOO.fromdense(m, nse=12) @ x).sum())(M)
    jgm = jax.grad(lambda m: (jsparse.BCOO.fromdense(m, nse=12) @ x).sum())(M)
    np.testing.assert_allclose(np.asarray(gm), np.asarray(jgm), rtol=1e-5, atol=1e-6)


def test_vmap_over_a_batched_bcoo_matches_a_loop():
    M = _sparse_dense((3, 5, 4), seed=8)
    X = np.random.default_rng(9).uniform(-1, 1, (3, 4)).astype(np.float32)
    A = sparse.BCOO.fromdense(M, n_batch=1)

    def f(S, x):
        assert S.shape == (5, 4) and S.n_batch == 0
        return S @ x, S.T.todense(), (2.0 * S).sum(0)

    outs = fnad.vmap(f)(A, X)
    for i in range(3):
        Ai = sparse.BCOO((A.data[i], A.indices[i]), shape=(5, 4))
        for got, want in zip(outs, f(Ai, X[i])):
            got_i = got.todense()[i] if isinstance(got, sparse.BCOO) else got[i]
            want = want.todense() if isinstance(want, sparse.BCOO) else want
            np.testing.assert_allclose(np.asarray(got_i), np.asarray(want), rtol=1e-6)
    # a BCOO out of vmap gets the batch dimension back, and fromdense maps over a stack
    nse = A.nse + 1
    B = fnad.vmap(lambda m: sparse.BCOO.fromdense(m, nse=nse))(M)
    assert (B.shape, B.n_batch, B.nse) == ((3, 5, 4), 1, nse)
    np.testing.assert_array_equal(np.asarray(B.todense()), M)
    _same_bcoo(B, jsparse.BCOO.fromdense(M, nse=nse, n_batch=1))
    # in_axes=None broadcasts the BCOO; a BCOO with n_batch=0 cannot be mapped
    C = sparse.BCOO.fromdense(M[0])
    y = fnad.vmap(lambda S, x: S @ x, in_axes=(None, 0))(C, X)
    np.testing.assert_allclose(np.asarray(y), X @ M[0].T, rtol=1e-5)
    raises_with(lambda: fnad.vmap(lambda S: S.todense())(C), "batch dimensions",
                exc=ValueError)


def test_jit_takes_and_returns_bcoo_and_fromdense_needs_a_static_nse():
    M = _sparse_dense((4, 6), seed=10)
    x = np.ones(6, np.float32)
    A = sparse.BCOO.fromdense(M)
    y = traced(lambda S, x: S @ x)(A, x)
    np.testing.assert_allclose(np.asarray(y), M @ x, rtol=1e-5)
    B = traced(lambda m: sparse.BCOO.fromdense(m, nse=A.nse + 1) * 3.0)(M)
    assert isinstance(B, sparse.BCOO) and B.nse == A.nse + 1
    np.testing.assert_allclose(np.asarray(B.todense()), 3 * M, rtol=1e-6)
    raises_with(lambda: traced(lambda m: sparse.BCOO.fromdense(m))(M), "nse", "concrete",
                exc=ConcretizationTypeError)
    raises_with(lambda: traced(lambda S: S.sum_duplicates())(A), "nse",
                exc=ConcretizationTypeError)


def test_transpose_sum_and_elementwise_products():
    """transpose against jax; sums and products against NumPy on the dense arrays."""
    M = _sparse_dense((2, 3, 4, 2), seed=11)
    A = sparse.BCOO.fromdense(M, n_batch=1, n_dense=1)
    J = jsparse.BCOO.fromdense(M, n_batch=1, n_dense=1)
    perm = (0, 2, 1, 3)
    _same_bcoo(A.transpose(perm), J.transpose(perm))
    for axes in [(0,), (1,), (3,), (1, 2), (0, 2, 3)]:
        got = sparse.bcoo_reduce_sum(A, axes=axes)
        assert isinstance(got, sparse.BCOO)
        np.testing.assert_allclose(np.asarray(got.todense()), M.sum(axes), rtol=1e-5,
                                   atol=1e-6)
    np.testing.assert_allclose(np.asarray(A.sum()), M.sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(A.sum(-1).todense()), M.sum(-1), rtol=1e-5)
    D = np.random.default_rng(12).uniform(-1, 1, M.shape).astype(np.float32)
    for v in (D, D[:, :1, :, :], D[0, 0, 0], 2.5):
        got = A * v
        assert isinstance(got, sparse.BCOO) and got.nse == A.nse
        np.testing.assert_allclose(np.asarray(got.todense()), M * v, rtol=1e-6)
    np.testing.assert_allclose(np.asarray((2.5 * A).todense()), 2.5 * M, rtol=1e-6)
    np.testing.assert_allclose(np.asarray((-A).todense()), -M)
    assert A.astype(np.int32).dtype == np.int32
    # sparse * sparse: value and the gradient in both data arrays
    M2 = M * (np.random.default_rng(13).uniform(size=M.shape) < 0.7)
    A2 = sparse.BCOO.fromdense(M2, n_batch=1, n_dense=1, nse=A.nse + 1)   # with padding
    np.testing.assert_allclose(np.asarray((A * A2).todense()), M * M2, rtol=1e-6)
    g, g2 = fnad.grad(lambda a, b: sparse.bcoo_multiply_sparse(
        A._with_data(a), A2._with_data(b)).todense().sum(), argnums=(0, 1))(A.data, A2.data)
    np.testing.assert_allclose(np.asarray(g), _np_extract(A, M2), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g2), _np_extract(A2, M), rtol=1e-6)


@pytest.mark.parametrize("n_batch", [0, 1])
def test_sum_duplicates_and_sort_indices_with_padding_as_jax(n_batch):
    shape = (2, 4, 3) if n_batch else (4, 3)
    idx = np.array([[3, 1], [0, 2], [3, 1], [4, 3], [0, 0], [0, 2], [4, 3]], np.int32)
    data = np.array([1., 2., 3., 9., 0., 4., 9.], np.float32)         # [4, 3]: padding
    if n_batch:
        idx = np.stack([idx, idx[::-1]])
        data = np.stack([data, -data])
    A = sparse.BCOO((data, idx), shape=shape)
    J = jsparse.BCOO((data, idx), shape=shape)
    dense = np.asarray(J.todense())
    np.testing.assert_array_equal(np.asarray(A.todense()), dense)
    _same_bcoo(sparse.bcoo_sum_duplicates(A, nse=6), jsparse.bcoo_sum_duplicates(J, nse=6))
    if n_batch:
        _same_bcoo(A.sum_duplicates(), J.sum_duplicates())            # zeros removed too
        _same_bcoo(A.sort_indices(), J.sort_indices())
    for B in (A.sum_duplicates(), A.sum_duplicates(nse=5, remove_zeros=False),
              A.sort_indices()):
        np.testing.assert_allclose(np.asarray(B.todense()), dense, rtol=1e-6)
    # differentiable in data; padding entries get no gradient
    g = fnad.grad(lambda d: (sparse.bcoo_sum_duplicates(sparse.BCOO((d, idx), shape=shape),
                                                        nse=6).todense() ** 2).sum())(data)
    gt = fnad.grad(lambda d: (sparse.BCOO((d, idx), shape=shape).todense() ** 2).sum())(data)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gt), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gt), _np_extract(A, 2 * dense), rtol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"n_batch": 1}, {"n_dense": 1}, {"n_batch": 1, "k": 2},
                                {"k": -1}, {"k": 9}])
def test_eye_and_empty(kw):
    k = kw.pop("k", 0)
    got = sparse.eye(4, 5, k, **kw)
    assert (got.shape, got.n_batch, got.n_dense) == ((4, 5), kw.get("n_batch", 0),
                                                     kw.get("n_dense", 0))
    np.testing.assert_array_equal(np.asarray(got.todense()), np.eye(4, 5, k))
    E = sparse.empty((3, 4, 2), nse=2, **kw)
    np.testing.assert_array_equal(np.asarray(E.todense()), np.zeros((3, 4, 2)))
    if not kw and k == 0:
        _same_bcoo(got, jsparse.eye(4, 5))
        _same_bcoo(E, jsparse.empty((3, 4, 2), nse=2))


def test_errors_name_what_is_wrong():
    M = _sparse_dense((4, 3), seed=14)
    A = sparse.BCOO.fromdense(M)
    raises_with(lambda: sparse.BCOO((A.data, A.indices), shape=(4, 3, 2)), "data of shape",
                "(4, 3, 2)", exc=ValueError)
    raises_with(lambda: sparse.BCOO((A.data[:2], A.indices), shape=(4, 3)), "data", "nse",
                exc=ValueError)
    raises_with(lambda: sparse.BCOO((A.data, A.indices.astype(np.float32)), shape=(4, 3)),
                "integers", exc=ValueError)
    raises_with(lambda: A @ np.ones(4, np.float32), "dot_general", "(4,)")
    raises_with(lambda: A * np.ones((2, 4, 3), np.float32), "broadcast", exc=ValueError)
    raises_with(lambda: sparse.bcoo_multiply_sparse(A, A.T), "shapes", exc=ValueError)
    raises_with(lambda: A.transpose((0, 0)), "permutation", exc=ValueError)
    B = sparse.BCOO.fromdense(_sparse_dense((2, 4, 3)), n_batch=1)
    raises_with(lambda: B.transpose((1, 0, 2)), "batch", exc=NotImplementedError)
    raises_with(lambda: sparse.bcoo_dot_general(
        A, np.ones((3, 4), np.float32), dimension_numbers=(([0], [1]), ([1], [0]))),
        "n_batch", exc=NotImplementedError)
    raises_with(lambda: sparse.bcoo_fromdense(M, n_batch=2, n_dense=1), "n_batch",
                exc=ValueError)


@pytest.mark.parametrize("n_batch,n_dense", [(0, 0), (1, 0), (0, 1)])
def test_add_sub_div_pow_abs_match_jax(n_batch, n_dense):
    """BCOO ± BCOO keeps both sides' entries (a BCOO, nse added); ± dense is dense; / a
    scalar or dense array, ** p > 0 and abs keep the pattern: jax's results."""
    x, y = _sparse_dense((3, 4, 2), 1), _sparse_dense((3, 4, 2), 2)
    d = np.random.default_rng(3).uniform(1, 2, (4, 2)).astype(np.float32)
    full = np.random.default_rng(4).uniform(1, 2, (3, 4, 2)).astype(np.float32)
    A = sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
    B = sparse.BCOO.fromdense(y, n_batch=n_batch, n_dense=n_dense)
    JA, JB = _to_jax(A), _to_jax(B)
    cases = [(lambda a, b: a + b, True), (lambda a, b: a - b, True),
             (lambda a, b: a + full, False),
             (lambda a, b: (full if isinstance(a, sparse.BCOO) else jnp.asarray(full)) + a,
              False),
             (lambda a, b: a / 2.0, True), (lambda a, b: a / d, True),
             (lambda a, b: a ** 2, True), (lambda a, b: abs(-a), True)]
    for i, (f, stays_sparse) in enumerate(cases):
        got, want = f(A, B), f(JA, JB)
        assert isinstance(got, sparse.BCOO) == stays_sparse == isinstance(want, jsparse.BCOO)
        if stays_sparse:
            assert got.nse == want.nse, i
            got, want = got.todense(), want.todense()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=str(i))
    # sparse - dense is dense here (jax: NotImplementedError)
    np.testing.assert_allclose(A - full, x - full, rtol=1e-6)
    np.testing.assert_allclose(full - A, full - x, rtol=1e-6)
    # differentiable through both data arrays
    g = fnad.grad(lambda da, db: fnp.sum(fnp.sin(
        (sparse.BCOO((da, A.indices), shape=A.shape) - sparse.BCOO((db, B.indices),
                                                                  shape=B.shape)).todense())),
        argnums=(0, 1))(A.data, B.data)
    diff = np.cos(x - y)
    np.testing.assert_allclose(g[0], _np_extract(A, diff), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g[1], -_np_extract(B, diff), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="positive"):
        A ** 0
    with pytest.raises(NotImplementedError, match="BCOO / BCOO"):
        A / B
    for small in (d, 1.0):       # a larger dense result: refused, as jax
        with pytest.raises(NotImplementedError, match="larger dense array"):
            A + small
        with pytest.raises(NotImplementedError):
            JA + small


_SPARSIFY = {  # name -> f(numpy module, a, x)
    "affine": lambda np_, a, x: (a * 2) @ x + 1,
    "transpose": lambda np_, a, x: a.T * 3,
    "sin": lambda np_, a, x: np_.sin(a),
    "sum0": lambda np_, a, x: a.sum(0),
    "add": lambda np_, a, x: a + a,
    "dot": lambda np_, a, x: np_.dot(a, x),
    "pow": lambda np_, a, x: a ** 2 - a,
    "tanh_scaled": lambda np_, a, x: (np_.tanh(a) * x).sum(),
}


@pytest.mark.parametrize("name", sorted(_SPARSIFY))
def test_sparsify_matches_jax(name):
    """sparsify keeps sparse what jax keeps sparse, with jax's values."""
    d = _sparse_dense((3, 4), 5)
    x = np.arange(1.0, 5.0, dtype=np.float32)
    p = _SPARSIFY[name]
    A = sparse.BCOO.fromdense(d)
    got = sparse.sparsify(lambda a, v: p(fnp, a, v))(A, x)
    want = jsparse.sparsify(lambda a, v: p(jnp, a, v))(_to_jax(A), jnp.asarray(x))
    assert isinstance(got, sparse.BCOO) == isinstance(want, jsparse.BCOO)
    todense = (lambda z: z.todense()) if isinstance(want, jsparse.BCOO) else (lambda z: z)
    np.testing.assert_allclose(todense(got), todense(want), rtol=1e-5, atol=1e-6)


def test_sparsify_under_jit_and_grad_and_errors():
    d = _sparse_dense((3, 4), 6)
    x = np.arange(1.0, 5.0, dtype=np.float32)
    A = sparse.BCOO.fromdense(d)
    f = sparse.sparsify(lambda a, v: (fnp.sin(a) @ v).sum())

    def loss(data):
        return f(sparse.BCOO((data, A.indices), shape=A.shape), x)
    np.testing.assert_allclose(traced(loss)(A.data), (np.sin(d) @ x).sum(), rtol=1e-5)
    np.testing.assert_allclose(fnad.grad(loss)(A.data), _np_extract(A, np.cos(d) * x),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="sparse rule for exp"):
        sparse.sparsify(fnp.exp)(A)
    with pytest.raises(NotImplementedError, match="two sparse operands"):
        sparse.sparsify(lambda a: a @ a.T)(A)


@pytest.mark.parametrize("n_batch,nse", [(0, None), (0, 17), (1, None)])
def test_bcsr_matches_jax(n_batch, nse):
    """BCSR's arrays (padding included), its BCOO form, products, as jax's; grad and jit."""
    d = _sparse_dense((2, 4, 5) if n_batch else (4, 5), 7)
    M = sparse.BCSR.fromdense(d, n_batch=n_batch, nse=nse)
    J = jsparse.BCSR.fromdense(d, n_batch=n_batch, nse=nse)
    assert repr(M) == repr(J)
    for field in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(M, field), getattr(J, field), err_msg=field)
    np.testing.assert_array_equal(M.to_bcoo().indices, J.to_bcoo().indices)
    np.testing.assert_array_equal(sparse.todense(M), d)
    x = np.arange(1.0, 6.0, dtype=np.float32)
    for rhs in (x, np.stack([x, -x], axis=1)):
        np.testing.assert_allclose(M @ rhs, J @ jnp.asarray(rhs), rtol=1e-6, atol=1e-6)
    B = sparse.BCSR.from_bcoo(sparse.BCOO.fromdense(d, n_batch=n_batch))
    np.testing.assert_array_equal(B.indptr, jsparse.BCSR.from_bcoo(
        jsparse.BCOO.fromdense(d, n_batch=n_batch)).indptr)

    def loss(data):
        return fnp.sum(sparse.BCSR((data, M.indices, M.indptr), shape=M.shape) @ x)
    np.testing.assert_allclose(traced(loss)(M.data), (d @ x).sum(), rtol=1e-5)
    want = jax.grad(lambda data: jnp.sum(jsparse.BCSR((data, J.indices, J.indptr),
                                                      shape=J.shape) @ jnp.asarray(x)))
    np.testing.assert_allclose(fnad.grad(loss)(M.data), want(J.data), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="transpose"):
        M.transpose()
    with pytest.raises(ValueError, match="exactly 2 sparse"):
        sparse.BCSR.fromdense(np.ones((2, 3, 4), np.float32))
