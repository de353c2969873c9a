"""COO, CSR, CSC, the JAXSparse base, the bcsr_* operations, bcoo_gather and
bcoo_dot_general_sampled of fnad.experimental.sparse, each compared with
jax.experimental.sparse at test time."""
import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad import lax as flax
from fnad.experimental import sparse as fs

jax = pytest.importorskip("jax", reason="jax is the oracle for the sparse formats")
jnp = pytest.importorskip("jax.numpy", reason="jax is the oracle for the sparse formats")
js = pytest.importorskip("jax.experimental.sparse", reason="jax.experimental.sparse is the "
                         "oracle for the sparse formats")

RNG = np.random.default_rng(7)
X = (np.array([[0, 1, 0], [3, 0, 0], [0, 0, 0], [0, 4, 5]]) * 1.5).astype(np.float32)
X3 = ((RNG.random((3, 4, 5)) < 0.4) * RNG.standard_normal((3, 4, 5))).astype(np.float32)
FORMATS = ("COO", "CSR", "CSC")


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def buffers(m):
    return [getattr(m, n) for n in ("data", "row", "col", "indices", "indptr") if hasattr(m, n)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("nse", [None, 7, 3])
def test_fromdense_todense_and_products(fmt, nse):
    F, J = getattr(fs, fmt).fromdense(X, nse=nse), getattr(js, fmt).fromdense(X, nse=nse)
    assert repr(F) == repr(J) and F.nse == J.nse and F.shape == J.shape
    for a, b in zip(buffers(F), buffers(J), strict=True):
        same(a, b)                                   # padding included
    same(F.todense(), J.todense())
    v, B = np.arange(3, dtype=np.float32), RNG.standard_normal((3, 2)).astype(np.float32)
    vt, Bt = np.arange(4, dtype=np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
    same(F @ v, J @ v)
    same(F @ B, J @ B)
    same(F.T.todense(), J.T.todense())
    same(F.T @ vt, J.T @ vt)
    same(F.T @ Bt, J.T @ Bt)
    assert type(F.T).__name__ == type(J.T).__name__
    same(F @ np.arange(3, dtype=np.int32), J @ jnp.arange(3, dtype=np.int32))   # promotion
    assert isinstance(F, fs.JAXSparse) and len(F) == 4 and F.ndim == 2 and F.size == 12


@pytest.mark.parametrize("fn", ["matvec", "matmat"])
@pytest.mark.parametrize("fmt", ["coo", "csr"])
@pytest.mark.parametrize("transpose", [False, True])
def test_functional_products(fn, fmt, transpose):
    F = getattr(fs, f"{fmt}_fromdense")(X, nse=6)
    J = getattr(js, f"{fmt}_fromdense")(X, nse=6)
    n = 4 if transpose else 3
    dense = np.arange(n * (1 if fn == "matvec" else 2), dtype=np.float32)
    dense = dense if fn == "matvec" else dense.reshape(n, 2)
    same(getattr(fs, f"{fmt}_{fn}")(F, dense, transpose=transpose),
         getattr(js, f"{fmt}_{fn}")(J, dense, transpose=transpose))
    same(getattr(fs, f"{fmt}_todense")(F), getattr(js, f"{fmt}_todense")(J))


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
def test_eye_and_empty(fmt):
    for k in (-2, 0, 1, 5):
        F = fs.eye(3, 4, k, sparse_format=fmt)
        J = js.eye(3, 4, k, sparse_format=fmt)
        assert repr(F) == repr(J)
        same(F.todense(), J.todense())
    F, J = fs.empty((3, 4), sparse_format=fmt), js.empty((3, 4), sparse_format=fmt)
    assert repr(F) == repr(J)
    for a, b in zip(buffers(F), buffers(J), strict=True):
        same(a, b)


def test_empty_bcsr():
    F = fs.empty((2, 3, 4), sparse_format="bcsr", n_batch=1, nse=2)
    J = js.empty((2, 3, 4), sparse_format="bcsr", n_batch=1, nse=2)
    for a, b in zip(buffers(F), buffers(J), strict=True):
        same(a, b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_grad_jit_vmap(fmt):
    F, J = getattr(fs, fmt).fromdense(X), getattr(js, fmt).fromdense(X)
    v = np.arange(3, dtype=np.float32)

    def loss(lib, np_, cls, mat, densify=False):
        def f(data, x):
            m = cls((data, *buffers(mat)[1:]), shape=mat.shape)
            return np_.sum(np_.sin((m.todense() if densify else m) @ x) ** 2)
        return lib.grad(f, argnums=(0, 1))(mat.data, v)
    # jax's own gradient of CSC @ x in data is wrong (jax 0.10.2: it puts entry 1's
    # derivative at entry 0; central differences agree with fnad), so the oracle is jax's
    # gradient through todense(), and jax's sparse product where it is right.
    oracles = [loss(jax, jnp, type(J), J, densify=True)]
    oracles += [loss(jax, jnp, type(J), J)] if fmt != "CSC" else []
    for oracle in oracles:
        for a, b in zip(loss(fnad, fnp, type(F), F), oracle, strict=True):
            same(a, b)
    same(fnad.jit(lambda m, x: m @ x)(F, v), J @ v)
    vs = RNG.standard_normal((2, 3)).astype(np.float32)
    same(fnad.vmap(lambda x: F @ x)(vs), np.stack([J @ x for x in vs]))   # jax: no vmap rule
    same(fnad.jit(lambda x: getattr(fs, fmt).fromdense(x, nse=5).todense())(X),
         getattr(js, fmt).fromdense(X, nse=5).todense())


def test_errors():
    with pytest.raises(ValueError, match="ndim=2"):
        fs.COO.fromdense(X3)
    with pytest.raises(fnad.errors.ConcretizationTypeError, match="nse="):
        fnad.jit(lambda x: fs.csr_fromdense(x).data)(X)
    with pytest.raises(NotImplementedError, match="two sparse objects"):
        fs.CSR.fromdense(X) @ fs.COO.fromdense(X.T)
    with pytest.raises(ValueError, match="needs 3"):
        fs.CSR.fromdense(X) @ np.ones(4, np.float32)
    with pytest.raises(NotImplementedError, match="1-D and 2-D"):
        fs.COO.fromdense(X) @ np.ones((2, 3, 2), np.float32)
    with pytest.raises(ValueError, match="indptr has 3 entries"):
        fs.CSR((X[X != 0], np.zeros(4, np.int32), np.zeros(3, np.int32)), shape=(4, 3))
    with pytest.raises(ValueError, match="one shape"):
        fs.COO((np.ones(3), np.zeros(2, np.int32), np.zeros(3, np.int32)), shape=(4, 3))
    with pytest.raises(TypeError, match="1-D integer"):
        fs.COO((np.ones(3), np.zeros(3), np.zeros(3, np.int32)), shape=(4, 3))
    with pytest.raises(ValueError, match="not recognized"):
        fs.empty((3, 4), sparse_format="dok")
    with pytest.raises(ValueError, match="not recognized"):
        fs.eye(3, sparse_format="bcsr")                  # jax's eye has no bcsr either
    with pytest.raises(TypeError, match="takes no n_batch="):
        fs.empty((3, 4), sparse_format="csr", n_batch=1)
    with pytest.raises(NotImplementedError, match="COO.sum"):
        fs.COO.fromdense(X).sum()
    with pytest.raises(TypeError, match="expects a CSR"):
        fs.csr_todense(fs.COO.fromdense(X))
    M = fs.BCSR.fromdense(X)
    with pytest.raises(ValueError, match="do not fit a matrix of shape"):
        fs.bcsr_extract(M.indices, M.indptr, X.T)                # indptr needs 4 + 1 rows
    with pytest.raises(TypeError, match=r"bcsr_concatenate \(operand 1\) expects a BCSR"):
        fs.bcsr_concatenate([M, fs.BCOO.fromdense(X)], dimension=0)
    with pytest.raises(ValueError, match="do not index the product's shape"):
        fs.bcoo_dot_general_sampled(X, X.T, np.zeros((2, 3), np.int32),
                                    dimension_numbers=(([1], [0]), ([], [])))


@pytest.mark.parametrize("n_batch", [0, 1])
def test_bcsr_operations(n_batch):
    x = X3 if n_batch else X3[0]
    F, J = fs.BCSR.fromdense(x, n_batch=n_batch), js.BCSR.fromdense(x, n_batch=n_batch)
    same(fs.bcsr_extract(F.indices, F.indptr, 2 * x), js.bcsr_extract(J.indices, J.indptr,
                                                                         2 * x))
    rhs = RNG.standard_normal((5, 2)).astype(np.float32)
    dn = (([n_batch + 1], [0]), ([], []))
    same(fs.bcsr_dot_general(F, rhs, dimension_numbers=dn),
         js.bcsr_dot_general(J, rhs, dimension_numbers=dn))
    # The structural operations against their dense meaning (jax's eager sparse operations
    # take seconds each to compile).
    b = F.to_bcoo()                                                   # every entry twice
    twice = fs.BCSR.from_bcoo(fs.BCOO((fnp.concatenate([b.data, b.data], n_batch),
                                       fnp.concatenate([b.indices, b.indices], n_batch)),
                                      shape=b.shape))
    assert twice.nse == 2 * F.nse
    summed = fs.bcsr_sum_duplicates(twice)
    assert isinstance(summed, fs.BCSR) and summed.nse == F.nse
    same(summed.todense(), 2 * x)
    with_zero = F._with_data(F.data.at[..., 0].set(0))
    same(fs.bcsr_eliminate_zeros(with_zero).todense(), with_zero.todense())
    assert fs.bcsr_eliminate_zeros(with_zero).nse == F.nse - 1
    for dim in range(n_batch + 2):
        same(fs.bcsr_concatenate([F, F], dimension=dim).todense(),
             np.concatenate([x, x], axis=dim))
    if n_batch == 0:
        shape = (2, *x.shape)
        out = fs.bcsr_broadcast_in_dim(F, shape=shape, broadcast_dimensions=(1, 2))
        assert isinstance(out, fs.BCSR) and out.n_batch == 1
        same(out.todense(), np.broadcast_to(x, shape))
    grad_f = fnad.grad(lambda d: fnp.sum(fs.bcsr_dot_general(
        fs.BCSR((d, F.indices, F.indptr), shape=F.shape), rhs, dimension_numbers=dn) ** 2))
    grad_j = jax.grad(lambda d: jnp.sum(js.bcsr_dot_general(
        js.BCSR((d, J.indices, J.indptr), shape=J.shape), rhs, dimension_numbers=dn) ** 2))
    same(grad_f(F.data), grad_j(J.data))
    with pytest.raises(NotImplementedError, match="dense rhs"):
        fs.bcsr_dot_general(F, F, dimension_numbers=dn)


@pytest.mark.parametrize("n_batch", [0, 1])
def test_bcoo_dot_general_sampled(n_batch):
    a = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    b = RNG.standard_normal((3, 2, 5)).astype(np.float32)
    dn = (([2], [1]), ([0], [0]))
    F, J = fs.BCOO.fromdense(X3, n_batch=n_batch), js.BCOO.fromdense(X3, n_batch=n_batch)
    same(fs.bcoo_dot_general_sampled(a, b, F.indices, dimension_numbers=dn),
         js.bcoo_dot_general_sampled(a, b, J.indices, dimension_numbers=dn))
    gf = fnad.grad(lambda a: fnp.sum(fs.bcoo_dot_general_sampled(
        a, b, F.indices, dimension_numbers=dn) ** 2))(a)
    gj = jax.grad(lambda a: jnp.sum(js.bcoo_dot_general_sampled(
        a, b, J.indices, dimension_numbers=dn) ** 2))(a)
    same(gf, gj)


GATHERS = [((1,), (0, 1), (0, 1), (1, 1, 5), 2), ((1, 2), (0,), (0,), (1, 4, 5), 1),
           ((1, 2, 3), (), (1, 2), (3, 1, 2), 2), ((0, 1), (1,), (1,), (3, 1, 5), 1)]


@pytest.mark.parametrize("n_batch, offset, collapsed, index_map, sizes, k",
                         [(0, *g) for g in GATHERS] + [(1, *g) for g in GATHERS[1:3]])
def test_bcoo_gather(n_batch, offset, collapsed, index_map, sizes, k):
    idx = np.array([[0, 1], [2, 3], [1, 0]], np.int32)[:, :k]
    F, J = fs.BCOO.fromdense(X3, n_batch=n_batch), js.BCOO.fromdense(X3, n_batch=n_batch)
    fd = flax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed,
                                     start_index_map=index_map)
    jd = jax.lax.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed,
                                        start_index_map=index_map)
    out = fs.bcoo_gather(F, idx, fd, sizes)
    assert isinstance(out, fs.BCOO)
    same(out.todense(), jax.lax.gather(X3, idx, jd, sizes))
    if (n_batch, k) == (0, 1):                  # jax's bcoo_gather takes seconds to compile
        same(out.todense(), js.bcoo_gather(J, idx, jd, sizes).todense())
    with pytest.raises(NotImplementedError, match="mode="):
        fs.bcoo_gather(F, idx, fd, sizes, mode="clip")


def test_spsolve():
    from jax.experimental.sparse import linalg as jl
    a = ((RNG.random((5, 5)) < 0.4) * RNG.standard_normal((5, 5)) + 3 * np.eye(5))
    a, b = a.astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    F, J = fs.CSR.fromdense(a), js.CSR.fromdense(a)
    same(fs.linalg.spsolve(F.data, F.indices, F.indptr, b),
         jl.spsolve(J.data, J.indices, J.indptr, b))
    gf = fnad.grad(lambda d, b: fnp.sum(fs.linalg.spsolve(d, F.indices, F.indptr, b) ** 2),
                   argnums=(0, 1))(F.data, b)
    gj = jax.grad(lambda d, b: jnp.sum(jl.spsolve(d, J.indices, J.indptr, b) ** 2),
                  argnums=(0, 1))(J.data, b)
    for p, q in zip(gf, gj, strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)
    bs = RNG.standard_normal((3, 5)).astype(np.float32)          # jax's CPU spsolve: no vmap
    same(fnad.vmap(lambda b: fs.linalg.spsolve(F.data, F.indices, F.indptr, b))(bs),
         np.stack([jl.spsolve(J.data, J.indices, J.indptr, b) for b in bs]))
    with pytest.raises(ValueError, match="vector of the matrix's size 5"):
        fs.linalg.spsolve(F.data, F.indices, F.indptr, np.ones(4, np.float32))


SPDOT = [((4, 5), 0, (5, 3), 0, (([1], [0]), ([], []))),
         ((4, 5), 0, (3, 5), 0, (([1], [1]), ([], []))),
         ((4, 5), 0, (5,), 0, (([1], [0]), ([], []))),
         ((2, 4, 5), 1, (2, 5, 3), 1, (([2], [1]), ([0], [0]))),
         ((2, 4, 5), 1, (5, 3), 0, (([2], [0]), ([], []))),
         ((4, 5), 0, (4, 5), 0, (([0, 1], [0, 1]), ([], []))),
         ((4, 5), 0, (3, 2), 0, (([], []), ([], [])))]


@pytest.mark.parametrize("lshape, lnb, rshape, rnb, dn", SPDOT)
def test_sparse_sparse_dot_general(lshape, lnb, rshape, rnb, dn):
    a = ((RNG.random(lshape) < 0.4) * RNG.standard_normal(lshape)).astype(np.float32)
    b = ((RNG.random(rshape) < 0.4) * RNG.standard_normal(rshape)).astype(np.float32)
    A, B = fs.BCOO.fromdense(a, n_batch=lnb), fs.BCOO.fromdense(b, n_batch=rnb)
    JA, JB = js.BCOO.fromdense(a, n_batch=lnb), js.BCOO.fromdense(b, n_batch=rnb)
    out = fs.bcoo_dot_general(A, B, dimension_numbers=dn)
    want = jax.jit(lambda x, y: js.bcoo_dot_general(x, y, dimension_numbers=dn))(JA, JB)
    assert isinstance(out, fs.BCOO) and repr(out) == repr(want)      # (jit: eager is slow)
    same(out.indices, want.indices)
    same(out.data, want.data)
    # jax has no gradient for its sparse-sparse product: the oracle is the dense product's
    grad = fnad.grad(lambda d: fnp.sum(fs.bcoo_dot_general(
        A._with_data(d), B, dimension_numbers=dn).todense() ** 2))(A.data)
    want_grad = jax.jit(jax.grad(lambda d: jnp.sum(jax.lax.dot_general(
        js.BCOO((d, JA.indices), shape=JA.shape).todense(), b, dn) ** 2)))(JA.data)
    same(grad, want_grad)


def test_sparse_matmul_and_errors():
    a = ((RNG.random((4, 5)) < 0.5) * RNG.standard_normal((4, 5))).astype(np.float32)
    A = fs.BCOO.fromdense(a)
    out = fnad.jit(lambda x, y: x @ y)(A, A.T)
    assert isinstance(out, fs.BCOO)
    same(out.todense(), a @ a.T)
    with pytest.raises(NotImplementedError, match="dense dimensions"):
        fs.bcoo_spdot_general(fs.BCOO.fromdense(a, n_dense=1), A.T,
                              dimension_numbers=(([0], [1]), ([], [])))
    with pytest.raises(NotImplementedError, match="contracting dims"):
        fs.bcoo_spdot_general(fs.BCOO.fromdense(np.stack([a] * 4), n_batch=1), A,
                              dimension_numbers=(([0], [0]), ([], [])))
