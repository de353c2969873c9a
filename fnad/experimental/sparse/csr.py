"""The CSR and CSC sparse matrices of jax.experimental.sparse.

    CSR((data, indices, indptr), shape=(m, n))   row r's entries are k in indptr[r]:indptr[r+1],
                                                 at columns indices[k]
    CSC((data, indices, indptr), shape=(m, n))   the same over columns: the CSR of the
                                                 transpose, so CSR.T is a CSC and back

Entries past indptr[-1] are padding (csr_fromdense with nse above the number of nonzeros
leaves zeros there, as jax). Every operation goes through the COO form (row of entry k: the
number of indptr[1:] values <= k, which is m for padding, dropped from every sum), composed
from fnad.numpy operations: grad (through `data` and the dense operand), vmap and jit come
from their rules. As in jax, prefer BCOO/BCSR for anything beyond conversions and products.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import tree_util
from fnad.experimental.sparse._base import JAXSparse, check_format
from fnad.experimental.sparse.coo import (COO, _check_2d, _concrete_nse, _dense_operand,
                                          _one_dim_index, _product, _scatter_rows,
                                          _sparse_matmul)

__all__ = ["CSR", "CSC", "csr_fromdense", "csr_todense", "csr_matvec", "csr_matmat"]


def _rows_of(indptr, nse: int):
    """The row of each of nse entries (m for the padding past indptr[-1])."""
    k = jnp.arange(nse, dtype=indptr.dtype)
    return jnp.searchsorted(indptr[1:], k, side="right").astype(indptr.dtype)


def _indptr_of(row, m: int, index_dtype):
    """[m + 1] row pointers of entries sorted by row (rows >= m are not counted)."""
    counts = jnp.bincount(row, length=m).astype(index_dtype)
    return jnp.concatenate([jnp.zeros((1,), index_dtype), jnp.cumsum(counts)])


class _Info(NamedTuple):
    shape: tuple


class _Compressed(JAXSparse):
    """What CSR and CSC share: (data, indices, indptr) over a 2-D shape."""

    def __init__(self, args, *, shape: Sequence[int]):
        name = type(self).__name__
        try:
            data, indices, indptr = args
        except (TypeError, ValueError):
            raise TypeError(f"{name}: the first argument must be the triple (data, indices, "
                            f"indptr), got {type(args).__name__}") from None
        self.data = jnp.asarray(data)
        self.indices = _one_dim_index(indices, f"{name}: indices")
        self.indptr = _one_dim_index(indptr, f"{name}: indptr")
        super().__init__(args, shape=_check_2d(shape, name))
        if self.data.shape != self.indices.shape:
            raise ValueError(f"{name}: data {tuple(self.data.shape)} and indices "
                             f"{tuple(self.indices.shape)} must have one shape (nse,)")
        outer = self.shape[0] if isinstance(self, CSR) else self.shape[1]
        if self.indptr.shape[0] != outer + 1:
            raise ValueError(f"{name}: indptr has {self.indptr.shape[0]} entries; a matrix of "
                             f"shape {self.shape} needs {outer + 1}")

    dtype = property(lambda self: self.data.dtype)
    nse = property(lambda self: self.data.size)
    _bufs = property(lambda self: (self.data, self.indices, self.indptr))

    def _with_dtype(self, dtype):
        return type(self)((self.data.astype(dtype), self.indices, self.indptr),
                          shape=self.shape)

    def tree_flatten(self):
        """Children (data, indices, indptr); aux data a hashable _Info(shape) where jax has
        the dict {"shape": shape}, which tree_unflatten also takes."""
        return (self.data, self.indices, self.indptr), _Info(self.shape)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        aux_data = aux_data._asdict() if isinstance(aux_data, _Info) else aux_data
        if set(aux_data) != {"shape"}:
            raise ValueError(f"{cls.__name__}.tree_unflatten: invalid aux_data={aux_data!r}")
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        obj.shape = aux_data["shape"]
        return obj


class CSR(_Compressed):
    """A compressed-sparse-row matrix, as jax.experimental.sparse.CSR."""

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32) -> CSR:
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype=None, index_dtype="int32") -> CSR:
        """An all-zero CSR with nse = 0 (sparse.empty(..., sparse_format='csr'))."""
        shape = _check_2d(shape, "CSR")
        return cls((jnp.zeros((0,), dtype), jnp.zeros((0,), index_dtype),
                    jnp.zeros((shape[0] + 1,), index_dtype)), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSR:
        """Ones on diagonal k of an [N, M] matrix (sparse.eye(..., sparse_format='csr'))."""
        coo = COO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype)
        if coo.nse == 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        return cls((coo.data, coo.col, _indptr_of(coo.row, N, coo.row.dtype)), shape=(N, M))

    def todense(self):
        return csr_todense(self)

    def transpose(self, axes=None) -> CSC:
        if axes is not None:
            raise NotImplementedError("CSR.transpose: the axes argument is not supported")
        return CSC((self.data, self.indices, self.indptr), shape=self.shape[::-1])

    def __matmul__(self, other):
        return _sparse_matmul(self, other, csr_matvec, csr_matmat)


class CSC(_Compressed):
    """A compressed-sparse-column matrix, as jax.experimental.sparse.CSC: the CSR of its
    transpose."""

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32) -> CSC:
        return csr_fromdense(jnp.asarray(mat).T, nse=nse, index_dtype=index_dtype).T

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype=None, index_dtype="int32") -> CSC:
        """An all-zero CSC with nse = 0 (sparse.empty(..., sparse_format='csc'))."""
        shape = _check_2d(shape, "CSC")
        return CSR._empty(shape[::-1], dtype=dtype, index_dtype=index_dtype).T

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSC:
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self):
        return csr_todense(self.T).T

    def transpose(self, axes=None) -> CSR:
        if axes is not None:
            raise NotImplementedError("CSC.transpose: the axes argument is not supported")
        return CSR((self.data, self.indices, self.indptr), shape=self.shape[::-1])

    def __matmul__(self, other):
        return _sparse_matmul(self.T, other, csr_matvec, csr_matmat, name="CSC",
                              transpose=True)


for _cls in (CSR, CSC):
    tree_util.register_pytree_node(_cls, _cls.tree_flatten, _cls.tree_unflatten)


def _check_csr(mat, what: str) -> None:
    check_format(mat, CSR, what, "matrix")


# ---- conversions -----------------------------------------------------------------------------
def csr_fromdense(mat, *, nse: int | None = None, index_dtype=np.int32) -> CSR:
    """The nonzero entries of a 2-D matrix, row by row, as a CSR with `nse` entries (default:
    the number of nonzeros; required under jit). Past the nonzeros: zero padding."""
    mat = jnp.asarray(mat)
    m = _check_2d(mat.shape, "csr_fromdense: the matrix")[0]
    nse = _concrete_nse(nse, mat, "csr_fromdense")
    row, col = jnp.nonzero(mat, size=nse)
    real = jnp.arange(nse) < jnp.count_nonzero(mat)
    data = jnp.where(real, mat[row, col], jnp.zeros((), mat.dtype))
    row = jnp.where(real, row, m)
    return CSR((data, col.astype(index_dtype), _indptr_of(row, m, np.dtype(index_dtype))),
               shape=mat.shape)


def csr_todense(mat: CSR):
    """The dense [m, n] matrix of a CSR (duplicates added, padding dropped)."""
    _check_csr(mat, "csr_todense")
    return _scatter_rows(mat.shape, _rows_of(mat.indptr, mat.nse), mat.indices, mat.data)


# ---- products -------------------------------------------------------------------------------
def csr_matvec(mat: CSR, v, transpose: bool = False):
    """mat @ v (mat.T @ v if transpose) for a dense vector v."""
    _check_csr(mat, "csr_matvec")
    v = _dense_operand(v, 1, "csr_matvec", "v")
    return _product(mat.data, _rows_of(mat.indptr, mat.nse), mat.indices, v, mat.shape,
                    transpose, "csr_matvec")


def csr_matmat(mat: CSR, B, *, transpose: bool = False):
    """mat @ B (mat.T @ B if transpose) for a dense matrix B."""
    _check_csr(mat, "csr_matmat")
    B = _dense_operand(B, 2, "csr_matmat", "B")
    return _product(mat.data, _rows_of(mat.indptr, mat.nse), mat.indices, B, mat.shape,
                    transpose, "csr_matmat")
