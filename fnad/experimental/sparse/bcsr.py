"""The BCSR sparse matrix (jax.experimental.sparse's batched compressed-sparse-row format):
conversions to and from dense arrays and BCOO, and products through BCOO.

A BCSR array of shape [*B, rows, cols, *D] (n_batch batch dims, two sparse dims, n_dense
dense dims) stores, per batch position, `nse` entries in row order:

    data    [*B, nse, *D]     the stored blocks
    indices [*B, nse]         their column indices (int)
    indptr  [*B, rows + 1]    row r's entries are indptr[r]:indptr[r + 1]

Slots past indptr[-1] are padding (column index = cols), as in jax. The products convert to
BCOO (row of entry k: the number of indptr[1:] values <= k) and use its rules, so grad (in
`data` and the dense operand), vmap and jit work as for BCOO.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import fnad.numpy as jnp
from fnad import tree_util
from fnad.core import Tracer
from fnad.experimental.sparse._base import JAXSparse, check_format
from fnad.experimental.sparse.bcoo import BCOO, bcoo_fromdense, bcoo_sort_indices

__all__ = ["BCSR", "bcsr_broadcast_in_dim", "bcsr_concatenate", "bcsr_dot_general",
           "bcsr_eliminate_zeros", "bcsr_extract", "bcsr_fromdense", "bcsr_sum_duplicates",
           "bcsr_todense"]


def _batched(fn, n_batch: int):
    """fn over the leading n_batch dims of its arguments (nested vmaps)."""
    from fnad import vmap
    for _ in range(n_batch):
        fn = vmap(fn)
    return fn


class BCSR(JAXSparse):
    """A batched compressed-sparse-row matrix, as jax.experimental.sparse.BCSR."""

    __array_priority__ = 200

    def __init__(self, args, *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        self.data, self.indices, self.indptr = (jnp.asarray(a) for a in args)
        self.shape = tuple(int(s) for s in shape)
        self.indices_sorted, self.unique_indices = indices_sorted, unique_indices
        nb = self.indices.ndim - 1
        if nb < 0 or self.indptr.ndim != nb + 1 or len(self.shape) < nb + 2:
            raise ValueError(f"BCSR: indices {self.indices.shape} and indptr "
                             f"{self.indptr.shape} do not fit a matrix of shape {self.shape} "
                             "(indices [*batch, nse], indptr [*batch, rows + 1])")
        if self.indptr.shape[-1] != self.shape[nb] + 1:
            raise ValueError(f"BCSR: indptr's last dim {self.indptr.shape[-1]} must be the "
                             f"number of rows + 1 = {self.shape[nb] + 1}")
        expect = (*self.indices.shape, *self.shape[nb + 2:])
        if tuple(self.data.shape) != expect:
            raise ValueError(f"BCSR: data of shape {tuple(self.data.shape)} does not fit: "
                             f"expected {expect}")

    n_batch = property(lambda self: self.indices.ndim - 1)
    n_sparse = property(lambda self: 2)
    n_dense = property(lambda self: len(self.shape) - self.n_batch - 2)
    nse = property(lambda self: self.indices.shape[-1])
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))

    def __repr__(self):
        extra = f", nse={self.nse}"
        extra += f", n_batch={self.n_batch}" if self.n_batch else ""
        extra += f", n_dense={self.n_dense}" if self.n_dense else ""
        text = f"BCSR({np.dtype(self.dtype).name}{list(self.shape)}{extra})"
        return f"{type(self.data).__name__}[{text}]" if isinstance(self.data, Tracer) \
            else text

    # -- conversions
    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32,
                  n_dense: int = 0, n_batch: int = 0) -> BCSR:
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_bcoo(cls, arr: BCOO) -> BCSR:
        """The same matrix in BCSR form (its entries sorted into row order)."""
        if not isinstance(arr, BCOO) or arr.n_sparse != 2:
            raise ValueError("BCSR.from_bcoo needs a BCOO with two sparse dimensions, got "
                             f"{arr!r}")
        arr = bcoo_sort_indices(arr)
        nb, rows = arr.n_batch, arr.shape[arr.n_batch]
        indices = jnp.broadcast_to(arr.indices, (*arr.shape[:nb], *arr.indices.shape[nb:]))

        def indptr_of(row_ids):                     # [nse] -> [rows + 1]
            counts = jnp.bincount(row_ids, length=rows)
            return jnp.concatenate([jnp.zeros((1,), counts.dtype), jnp.cumsum(counts)])
        indptr = _batched(indptr_of, nb)(indices[..., 0]).astype(indices.dtype)
        data = jnp.broadcast_to(arr.data, (*arr.shape[:nb], *arr.data.shape[nb:]))
        return cls((data, indices[..., 1], indptr), shape=arr.shape, indices_sorted=True,
                   unique_indices=arr.unique_indices)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype=None, index_dtype="int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCSR:
        """An all-zero BCSR: nse padding entries per batch position (sparse.empty)."""
        shape = tuple(shape)
        if min(n_dense, n_batch, nse) < 0 or len(shape) - n_batch - n_dense != 2:
            raise ValueError(f"empty: a BCSR needs 2 sparse dimensions and no negative counts; "
                             f"got shape={shape}, n_batch={n_batch}, n_dense={n_dense}, "
                             f"nse={nse}")
        B, (rows, cols), D = shape[:n_batch], shape[n_batch:n_batch + 2], shape[n_batch + 2:]
        return cls((jnp.zeros((*B, nse, *D), dtype), jnp.full((*B, nse), cols, index_dtype),
                    jnp.zeros((*B, rows + 1), index_dtype)), shape=shape)

    def to_bcoo(self) -> BCOO:
        """The same matrix as a BCOO (row indices from indptr; padding stays padding)."""
        rows, nse = self.shape[self.n_batch], self.nse

        def rows_of(indptr):                        # [rows + 1] -> [nse]
            k = jnp.arange(nse, dtype=indptr.dtype)
            return jnp.searchsorted(indptr[1:], k, side="right").astype(indptr.dtype)
        row_ids = _batched(rows_of, self.n_batch)(self.indptr)
        row_ids = jnp.minimum(row_ids, rows)        # past the last row: padding (rows)
        indices = jnp.stack([row_ids, self.indices.astype(row_ids.dtype)], axis=-1)
        return BCOO((self.data, indices), shape=self.shape, indices_sorted=True,
                    unique_indices=self.unique_indices)

    def todense(self):
        return self.to_bcoo().todense()

    def block_until_ready(self) -> BCSR:
        for x in (self.data, self.indices, self.indptr):
            x.block_until_ready()
        return self

    def _with_data(self, data) -> BCSR:
        return BCSR((data, self.indices, self.indptr), shape=self.shape,
                    indices_sorted=self.indices_sorted, unique_indices=self.unique_indices)

    # -- pytree
    def tree_flatten(self):
        return (self.data, self.indices, self.indptr), (self.shape, self.indices_sorted,
                                                        self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux, children) -> BCSR:
        obj = object.__new__(cls)                # no validation: leaves may be anything
        obj.data, obj.indices, obj.indptr = children
        obj.shape, obj.indices_sorted, obj.unique_indices = aux
        return obj

    # -- arithmetic (through BCOO)
    def __matmul__(self, other):
        return self.to_bcoo() @ other

    def __rmatmul__(self, other):
        return other @ self.to_bcoo()

    def __mul__(self, other):
        if isinstance(other, (int, float, complex, np.number)) or np.ndim(other) == 0:
            return self._with_data(self.data * other)
        return NotImplemented

    __rmul__ = __mul__

    def __neg__(self) -> BCSR:
        return self._with_data(-self.data)

    def astype(self, dtype) -> BCSR:
        return self._with_data(self.data.astype(dtype))

    def transpose(self, axes=None):
        raise NotImplementedError("BCSR transpose is not implemented (as in jax); convert "
                                  "with .to_bcoo() first")

    T = property(lambda self: self.transpose())


tree_util.register_pytree_node(BCSR, BCSR.tree_flatten, BCSR.tree_unflatten)


def bcsr_fromdense(mat, *, nse: int | None = None, index_dtype=np.int32, n_dense: int = 0,
                   n_batch: int = 0) -> BCSR:
    """The BCSR form of a dense array whose dims n_batch and n_batch + 1 are the sparse
    rows and columns; nse as bcoo_fromdense (given under jit)."""
    mat = jnp.asarray(mat)
    if mat.ndim - n_batch - n_dense != 2:
        raise ValueError(f"bcsr_fromdense: a matrix of shape {mat.shape} with n_batch="
                         f"{n_batch} and n_dense={n_dense} must leave exactly 2 sparse "
                         "dimensions")
    return BCSR.from_bcoo(bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype,
                                         n_dense=n_dense, n_batch=n_batch))


def bcsr_todense(mat: BCSR):
    """The dense array of a BCSR matrix."""
    if not isinstance(mat, BCSR):
        raise TypeError(f"bcsr_todense expects a BCSR, got {type(mat).__name__}")
    return mat.todense()


def _check_bcsr(mat, what: str) -> None:
    check_format(mat, BCSR, what, "array")


def bcsr_extract(indices, indptr, mat):
    """The `data` of a BCSR with these (indices, indptr) holding the dense `mat`'s values at
    its entries ([*B, nse, *D]; 0 at padding): what grad needs of a BCSR's data."""
    from fnad.experimental.sparse.bcoo import _extract
    mat = jnp.asarray(mat)
    indices, indptr = jnp.asarray(indices), jnp.asarray(indptr)
    nb = indices.ndim - 1
    if nb < 0 or indptr.ndim != nb + 1 or mat.ndim < nb + 2 or \
            indptr.shape[-1] != mat.shape[nb] + 1:
        raise ValueError(f"bcsr_extract: indices {tuple(indices.shape)} and indptr "
                         f"{tuple(indptr.shape)} do not fit a matrix of shape {mat.shape} "
                         "(indices [*batch, nse], indptr [*batch, rows + 1])")
    pattern = BCSR((jnp.zeros((*indices.shape, *mat.shape[nb + 2:]), mat.dtype), indices,
                    indptr), shape=mat.shape).to_bcoo()
    return _extract(pattern.indices, mat, pattern._layout())


def bcsr_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    """lax.dot_general with a BCSR lhs and a dense rhs (the result is dense), or two dense
    operands, as jax's bcsr_dot_general; computed through BCOO (bcoo_dot_general)."""
    from fnad import lax
    from fnad.experimental.sparse._products import bcoo_dot_general
    if isinstance(rhs, JAXSparse) or not isinstance(lhs, (BCSR, np.ndarray, jnp.ndarray)):
        raise NotImplementedError("bcsr_dot_general is implemented for a BCSR (or dense) lhs "
                                  f"and a dense rhs, got {type(lhs).__name__} and "
                                  f"{type(rhs).__name__} (as in jax)")
    if not isinstance(lhs, BCSR):
        return lax.dot_general(lhs, rhs, dimension_numbers,
                               preferred_element_type=preferred_element_type)
    return bcoo_dot_general(lhs.to_bcoo(), rhs, dimension_numbers=dimension_numbers,
                            precision=precision, preferred_element_type=preferred_element_type)


def bcsr_sum_duplicates(mat: BCSR, nse: int | None = None) -> BCSR:
    """mat with duplicate entries added up and indices sorted (nse as bcoo_sum_duplicates)."""
    from fnad.experimental.sparse.bcoo import bcoo_sum_duplicates
    _check_bcsr(mat, "bcsr_sum_duplicates")
    return BCSR.from_bcoo(bcoo_sum_duplicates(mat.to_bcoo(), nse=nse))


def bcsr_eliminate_zeros(mat: BCSR, nse: int | None = None) -> BCSR:
    """mat without its stored zeros (nse as bcoo_eliminate_zeros)."""
    from fnad.experimental.sparse.bcoo import bcoo_eliminate_zeros
    _check_bcsr(mat, "bcsr_eliminate_zeros")
    return BCSR.from_bcoo(bcoo_eliminate_zeros(mat.to_bcoo(), nse=nse))


def bcsr_broadcast_in_dim(mat: BCSR, *, shape: Sequence[int],
                          broadcast_dimensions: Sequence[int], sharding=None) -> BCSR:
    """lax.broadcast_in_dim of a BCSR (through bcoo_broadcast_in_dim); the result must keep
    two sparse dimensions."""
    from fnad.experimental.sparse._structure import bcoo_broadcast_in_dim
    del sharding
    _check_bcsr(mat, "bcsr_broadcast_in_dim")
    return BCSR.from_bcoo(bcoo_broadcast_in_dim(mat.to_bcoo(), shape=shape,
                                                broadcast_dimensions=broadcast_dimensions))


def bcsr_concatenate(operands: Sequence[BCSR], *, dimension: int) -> BCSR:
    """lax.concatenate of BCSR arrays along a batch or sparse dimension (through
    bcoo_concatenate); the operands must share their layout."""
    from fnad.experimental.sparse._structure import bcoo_concatenate
    for i, op in enumerate(operands):
        _check_bcsr(op, f"bcsr_concatenate (operand {i})")
    return BCSR.from_bcoo(bcoo_concatenate([op.to_bcoo() for op in operands],
                                           dimension=dimension))
