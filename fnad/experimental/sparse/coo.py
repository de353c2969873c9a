"""The COO sparse matrix of jax.experimental.sparse: a 2-D matrix stored as `nse` triples
(data[k], row[k], col[k]), duplicates adding up.

    COO((data, row, col), shape=(m, n), rows_sorted=False, cols_sorted=False)

Its operations (coo_fromdense, coo_todense, coo_matvec, coo_matmat, and `@` with a dense
vector or matrix) are compositions of fnad.numpy operations (a gather of the dense operand,
a scatter-add into the result), so grad (through `data` and the dense operand), vmap and jit
come from their rules. An index out of bounds (the padding CSR gives row = m) is dropped
from every sum, as in jax. As in jax, prefer BCOO: COO has no batch or dense dims, and
fromdense with nse above the number of nonzeros pads with zeros at (0, 0).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes, lax, tree_util
from fnad.core import ConcretizationTypeError
from fnad.experimental.sparse._base import JAXSparse, check_format

__all__ = ["COO", "COOInfo", "coo_fromdense", "coo_todense", "coo_matvec", "coo_matmat"]


class COOInfo(NamedTuple):
    shape: tuple
    rows_sorted: bool = False
    cols_sorted: bool = False


def _check_2d(shape, what: str) -> tuple:
    shape = tuple(operator.index(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"{what} must have ndim=2; got shape={shape}")
    return shape


def _concrete_nse(nse, mat, what: str) -> int:
    if nse is None:
        try:
            return int((mat != 0).sum())
        except ConcretizationTypeError:
            raise ConcretizationTypeError(
                f"{what}: the number of nonzeros of a traced matrix is not known while "
                "tracing; pass nse= explicitly under jit/vmap/grad") from None
    try:
        return operator.index(nse)
    except TypeError:
        try:
            return int(nse)                       # a concrete 0-d array (jax accepts it too)
        except (TypeError, ConcretizationTypeError):
            raise ConcretizationTypeError(f"{what}: nse must be a concrete integer, got "
                                          f"{nse!r}") from None


def _one_dim_index(x, what: str):
    x = jnp.asarray(x)
    if x.ndim != 1 or not dtypes.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{what} must be a 1-D integer array, got {x.dtype}{list(x.shape)}")
    return x


class COO(JAXSparse):
    """A coordinate-format sparse matrix, as jax.experimental.sparse.COO."""

    def __init__(self, args, *, shape: Sequence[int], rows_sorted: bool = False,
                 cols_sorted: bool = False):
        try:
            data, row, col = args
        except (TypeError, ValueError):
            raise TypeError("COO: the first argument must be the triple (data, row, col), got "
                            f"{type(args).__name__}") from None
        self.data = jnp.asarray(data)
        self.row, self.col = _one_dim_index(row, "COO: row"), _one_dim_index(col, "COO: col")
        self._rows_sorted, self._cols_sorted = bool(rows_sorted), bool(cols_sorted)
        super().__init__(args, shape=_check_2d(shape, "COO"))
        if not self.data.shape == self.row.shape == self.col.shape:
            raise ValueError(f"COO: data {tuple(self.data.shape)}, row {tuple(self.row.shape)} "
                             f"and col {tuple(self.col.shape)} must have one shape (nse,)")

    dtype = property(lambda self: self.data.dtype)
    nse = property(lambda self: self.data.size)
    _info = property(lambda self: COOInfo(self.shape, self._rows_sorted, self._cols_sorted))
    _bufs = property(lambda self: (self.data, self.row, self.col))

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32) -> COO:
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    def _sort_indices(self) -> COO:
        """The same matrix with its entries sorted by row, then column (self if they are)."""
        if self._rows_sorted:
            return self
        row, col, data = lax.sort((self.row, self.col, self.data), num_keys=2)
        return COO((data, row, col), shape=self.shape, rows_sorted=True)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype=None, index_dtype="int32") -> COO:
        """An all-zero COO with nse = 0 (sparse.empty(..., sparse_format='coo'))."""
        shape = _check_2d(shape, "COO")
        index = jnp.zeros((0,), index_dtype)
        return cls((jnp.zeros((0,), dtype), index, index), shape=shape, rows_sorted=True,
                   cols_sorted=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> COO:
        """Ones on diagonal k of an [N, M] matrix (sparse.eye(..., sparse_format='coo'))."""
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        i = np.arange(diag)
        row = jnp.asarray(i + max(-k, 0), index_dtype)
        col = jnp.asarray(i + max(k, 0), index_dtype)
        return cls((jnp.ones((diag,), dtype), row, col), shape=(N, M), rows_sorted=True,
                   cols_sorted=True)

    def todense(self):
        return coo_todense(self)

    def transpose(self, axes=None) -> COO:
        if axes is not None:
            raise NotImplementedError("COO.transpose: the axes argument is not supported (as "
                                      "in jax); a COO matrix has only the one transpose")
        return COO((self.data, self.col, self.row), shape=self.shape[::-1],
                   rows_sorted=self._cols_sorted, cols_sorted=self._rows_sorted)

    def tree_flatten(self):
        """Children (data, row, col); aux data the COOInfo (a hashable NamedTuple where jax
        has its dict, which tree_unflatten also takes)."""
        return (self.data, self.row, self.col), self._info

    @classmethod
    def tree_unflatten(cls, aux_data, children) -> COO:
        aux_data = aux_data._asdict() if isinstance(aux_data, COOInfo) else aux_data
        if set(aux_data) != {"shape", "rows_sorted", "cols_sorted"}:
            raise ValueError(f"COO.tree_unflatten: invalid aux_data={aux_data!r}")
        obj = object.__new__(cls)
        obj.data, obj.row, obj.col = children
        obj.shape = aux_data["shape"]
        obj._rows_sorted, obj._cols_sorted = aux_data["rows_sorted"], aux_data["cols_sorted"]
        return obj

    def _with_dtype(self, dtype) -> COO:
        return COO((self.data.astype(dtype), self.row, self.col), **self._info._asdict())

    def __matmul__(self, other):
        return _sparse_matmul(self, other, coo_matvec, coo_matmat)


def _sparse_matmul(mat, other, matvec, matmat, name: str | None = None, **kwargs):
    """`mat @ other` for a dense vector or matrix: dtypes promoted first, as jax."""
    name = name or type(mat).__name__
    if isinstance(other, JAXSparse):
        raise NotImplementedError(f"{name} @ {type(other).__name__}: matmul between two "
                                  "sparse objects is not supported (as in jax)")
    other = jnp.asarray(other)
    dtype = dtypes.result_type(mat.data, other)
    mat = mat._with_dtype(dtype) if mat.dtype != dtype else mat
    other = other.astype(dtype)
    if other.ndim == 1:
        return matvec(mat, other, **kwargs)
    if other.ndim == 2:
        return matmat(mat, other, **kwargs)
    raise NotImplementedError(f"{name} @ an array of shape {other.shape}: only 1-D and 2-D "
                              "dense operands are supported (as in jax)")


tree_util.register_pytree_node(COO, COO.tree_flatten, COO.tree_unflatten)


def _check_coo(mat, what: str) -> None:
    check_format(mat, COO, what, "matrix")


# ---- conversions -----------------------------------------------------------------------------
def coo_fromdense(mat, *, nse: int | None = None, index_dtype=np.int32) -> COO:
    """The nonzero entries of a 2-D matrix, in row-major order, as a COO with `nse` entries
    (default: the number of nonzeros; required under jit). Past the nonzeros the entries
    are zeros at (0, 0), as in jax; fewer than the nonzeros keeps the first nse."""
    mat = jnp.asarray(mat)
    _check_2d(mat.shape, "coo_fromdense: the matrix")
    nse = _concrete_nse(nse, mat, "coo_fromdense")
    row, col = jnp.nonzero(mat, size=nse)           # filled with (0, 0)
    real = jnp.arange(nse) < jnp.count_nonzero(mat)
    data = jnp.where(real, mat[row, col], jnp.zeros((), mat.dtype))
    return COO((data, row.astype(index_dtype), col.astype(index_dtype)), shape=mat.shape,
               rows_sorted=True)


def coo_todense(mat: COO):
    """The dense [m, n] matrix of a COO (duplicates added, out-of-bounds entries dropped)."""
    _check_coo(mat, "coo_todense")
    return _scatter_rows(mat.shape, mat.row, mat.col, mat.data)


def _scatter_rows(shape, row, col, values):
    return jnp.zeros(shape, values.dtype).at[row, col].add(values, mode="drop")


# ---- products -------------------------------------------------------------------------------
def _dense_operand(x, ndim: int, what: str, name: str):
    """x as an array of rank `ndim` (a ValueError naming `what` and the argument if not)."""
    x = jnp.asarray(x)
    if x.ndim != ndim:
        raise ValueError(f"{what}: {name} must be {ndim}-D, got shape {x.shape}")
    return x


def _product(data, row, col, dense, shape, transpose: bool, what: str):
    """sum_k data[k] * dense[col[k]] into out[row[k]] (rows and cols swapped if transposed)."""
    if transpose:
        row, col = col, row
    m, n = shape[::-1] if transpose else shape
    if dense.shape[0] != n:
        raise ValueError(f"{what}: the dense operand has {dense.shape[0]} rows; the "
                         f"{'transposed ' if transpose else ''}sparse matrix of shape "
                         f"{(m, n)} needs {n}")
    picked = jnp.take(dense, col, axis=0, mode="fill", fill_value=0)
    terms = data.reshape(data.shape + (1,) * (dense.ndim - 1)) * picked
    return jnp.zeros((m,) + dense.shape[1:], terms.dtype).at[row].add(terms, mode="drop")


def coo_matvec(mat: COO, v, transpose: bool = False):
    """mat @ v (mat.T @ v if transpose) for a dense vector v."""
    _check_coo(mat, "coo_matvec")
    v = _dense_operand(v, 1, "coo_matvec", "v")
    return _product(mat.data, mat.row, mat.col, v, mat.shape, transpose, "coo_matvec")


def coo_matmat(mat: COO, B, *, transpose: bool = False):
    """mat @ B (mat.T @ B if transpose) for a dense matrix B."""
    _check_coo(mat, "coo_matmat")
    B = _dense_operand(B, 2, "coo_matmat", "B")
    return _product(mat.data, mat.row, mat.col, B, mat.shape, transpose, "coo_matmat")
