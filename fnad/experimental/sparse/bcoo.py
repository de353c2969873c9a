"""The BCOO sparse array (jax.experimental.sparse's batched-coordinate format) and the
operations that convert it or rearrange its entries: fromdense / todense, transpose,
reduce_sum, sort_indices, sum_duplicates, empty / eye.

A BCOO array of shape [*B, *S, *D] (n_batch batch dims B, n_sparse sparse dims S, n_dense
dense dims D) stores, for each batch position, `nse` entries:

    data    [*B, nse, *D]        the stored blocks
    indices [*B, nse, n_sparse]  their positions in S (int)

Duplicate indices add up. An index equal to the size of its dimension (out of bounds) marks
an unused padding slot: ignored by todense and every product. A leading batch dim of data or
indices may have size 1, broadcast against the array's batch shape.

Nothing here is a primitive: each operation is a composition of fnad.numpy / fnad.lax
operations (gather and scatter-add through `x.at[...]`, cumsum, sort, dot_general), so grad
(through `data` and dense operands), vmap and jit come from their rules. The products live in
_products.py. Imports fnad.core, fnad.dtypes, fnad.lax, fnad.numpy and fnad.tree_util.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes, lax, tree_util
from fnad.core import ConcretizationTypeError, Tracer
from fnad.experimental.sparse._base import JAXSparse, check_format

__all__ = ["BCOO", "bcoo_fromdense", "bcoo_todense", "bcoo_extract", "bcoo_transpose",
           "bcoo_reduce_sum", "bcoo_sort_indices", "bcoo_sum_duplicates",
           "bcoo_eliminate_zeros", "empty", "eye", "todense"]


# ---- layout --------------------------------------------------------------------------------
class Layout(NamedTuple):
    n_batch: int
    n_sparse: int
    n_dense: int
    nse: int


def _validate(data, indices, shape: tuple) -> Layout:
    """The layout of (data, indices) as a BCOO array of `shape`; ValueError if they do not fit."""
    ishape, dshape = tuple(indices.shape), tuple(data.shape)
    if len(ishape) < 2:
        raise ValueError(
            f"BCOO: indices must have shape [*batch, nse, n_sparse], got {ishape} (under vmap: "
            "the mapped axis of a BCOO must be one of its batch dimensions, n_batch > axis)")
    if not dtypes.is_int(indices.dtype):
        raise ValueError(f"BCOO: indices must be integers, got dtype {np.dtype(indices.dtype)}")
    n_batch = len(ishape) - 2
    nse, n_sparse = ishape[-2:]
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise ValueError(f"BCOO: indices of shape {ishape} (n_batch={n_batch}, "
                         f"n_sparse={n_sparse}) do not fit an array of shape {shape}")
    for what, s in (("indices", ishape), ("data", dshape)):
        if len(s) < n_batch or any(a not in (1, b) for a, b in zip(s[:n_batch], shape)):
            raise ValueError(f"BCOO: {what} batch dimensions {s[:n_batch]} do not match the "
                             f"batch dimensions {shape[:n_batch]} of shape {shape}")
    if dshape[n_batch:] != (nse, *shape[n_batch + n_sparse:]):
        raise ValueError(f"BCOO: data of shape {dshape} does not fit shape {shape} with "
                         f"nse={nse}, n_batch={n_batch}, n_dense={n_dense}: expected "
                         f"{(*shape[:n_batch], nse, *shape[n_batch + n_sparse:])}")
    return Layout(n_batch, n_sparse, n_dense, nse)


def _concrete_int(x, what: str) -> int:
    """`x` as a Python int; ConcretizationTypeError if it is only known at run time."""
    if isinstance(x, Tracer):
        value = x.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(
                f"{what} must be a concrete integer, got a traced value {x.aval.str_short()}: "
                "the number of stored elements fixes array shapes, so under jit, vmap and "
                "other tracing transformations pass nse=<int> explicitly.")
        x = value
    return operator.index(np.asarray(x).item() if not isinstance(x, int) else x)


def _batch_iotas(batch_shape: Sequence[int], n_trailing: int) -> list[np.ndarray]:
    """Per batch axis j, arange(B_j) shaped [1.., B_j, 1.., (1,)*n_trailing]: index arrays that
    broadcast against [*B, ...] to select each batch position."""
    nb = len(batch_shape)
    return [np.arange(b, dtype=np.int32).reshape(
        (1,) * j + (b,) + (1,) * (nb - j - 1 + n_trailing)) for j, b in enumerate(batch_shape)]


def _broadcast_batch(data, indices, shape, layout: Layout):
    """data and indices with their size-1 batch dims broadcast to the array's batch shape."""
    nb = layout.n_batch
    B = tuple(shape[:nb])
    if tuple(data.shape[:nb]) != B:
        data = jnp.broadcast_to(data, (*B, *data.shape[nb:]))
    if tuple(indices.shape[:nb]) != B:
        indices = jnp.broadcast_to(indices, (*B, *indices.shape[nb:]))
    return data, indices


def _fill_value(shape, layout: Layout, dtype):
    """The padding index: each sparse dimension's size, [n_sparse]."""
    nb, ns = layout.n_batch, layout.n_sparse
    return np.asarray(shape[nb:nb + ns], dtype=dtype)


# ---- the array -----------------------------------------------------------------------------
class BCOO(JAXSparse):
    """A batched-COO sparse array, as jax.experimental.sparse.BCOO.

    BCOO((data, indices), shape=shape): data [*B, nse, *D], indices [*B, nse, n_sparse]
    (see the module doc). A pytree with children (data, indices) and static aux data (shape,
    n_batch, indices_sorted, unique_indices), so it passes through jit, vmap (over its batch
    dimensions) and grad (with respect to `data`; indices are integers).
    """
    __array_priority__ = 200      # NumPy defers `ndarray @ BCOO` to __rmatmul__
    __array_ufunc__ = None
    __hash__ = None               # type: ignore[assignment]

    data: Any
    indices: Any
    shape: tuple
    indices_sorted: bool
    unique_indices: bool

    def __init__(self, args, *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        try:
            data, indices = args
        except (TypeError, ValueError):
            raise TypeError("BCOO: the first argument must be the pair (data, indices), got "
                            f"{type(args).__name__}") from None
        self.data, self.indices = jnp.asarray(data), jnp.asarray(indices)
        self.shape = tuple(operator.index(s) for s in shape)
        self.indices_sorted = bool(indices_sorted)
        self.unique_indices = bool(unique_indices)
        self._n_batch = _validate(self.data, self.indices, self.shape).n_batch

    # -- properties
    dtype = property(lambda self: self.data.dtype)
    nse = property(lambda self: self.indices.shape[-2])
    n_batch = property(lambda self: self.indices.ndim - 2)
    n_sparse = property(lambda self: self.indices.shape[-1])
    n_dense = property(lambda self: self.data.ndim - 1 - self.n_batch)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    T = property(lambda self: self.transpose())

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        try:
            extra = f", nse={self.nse}"
            extra += f", n_batch={self.n_batch}" if self.n_batch else ""
            extra += f", n_dense={self.n_dense}" if self.n_dense else ""
            text = f"BCOO({np.dtype(self.dtype).name}{list(self.shape)}{extra})"
        except Exception:
            text = "BCOO(<invalid>)"
        if isinstance(self.data, Tracer):
            text = f"{type(self.data).__name__}[{text}]"
        return text

    def _layout(self) -> Layout:
        return _validate(self.data, self.indices, self.shape)

    def _with_data(self, data) -> BCOO:
        """The same sparsity pattern holding `data` (of the same batch/nse/dense shape)."""
        return BCOO((data, self.indices), shape=self.shape, indices_sorted=self.indices_sorted,
                    unique_indices=self.unique_indices)

    # -- pytree
    def tree_flatten(self):
        return (self.data, self.indices), (self.shape, self._n_batch, self.indices_sorted,
                                           self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux, children) -> BCOO:
        """No validation (leaves may be anything: avals, axis specs...); but when vmap has
        removed or added batch dimensions, the batch shape is re-read from the leaves."""
        shape, n_batch, indices_sorted, unique_indices = aux
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        obj.shape, obj.indices_sorted, obj.unique_indices = shape, indices_sorted, unique_indices
        obj._n_batch = n_batch              # the leaves may not be arrays (vmap's axis specs)
        ishape, dshape = getattr(obj.indices, "shape", None), getattr(obj.data, "shape", None)
        if isinstance(ishape, tuple) and isinstance(dshape, tuple) and \
                len(ishape) - 2 != n_batch:
            nb = len(ishape) - 2
            if nb < 0 or len(dshape) < nb:
                raise ValueError(
                    f"BCOO: a transformation left indices of shape {ishape} and data of shape "
                    f"{dshape} for a BCOO of shape {shape} with n_batch={n_batch}: vmap (in_axes "
                    "and out_axes) may only map the batch dimensions of a BCOO")
            batch = tuple(max(a, b) for a, b in zip(dshape[:nb], ishape[:nb]))
            obj.shape, obj._n_batch = batch + tuple(shape[n_batch:]), nb
        return obj

    # -- conversions
    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> BCOO:
        """BCOO of a dense array (see bcoo_fromdense)."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    def todense(self):
        """The dense array [*shape]: stored entries scattered and summed; padding ignored."""
        return bcoo_todense(self)

    def block_until_ready(self) -> BCOO:
        for x in (self.data, self.indices):
            x.block_until_ready()
        return self

    # -- rearrangements
    def transpose(self, axes: Sequence[int] | None = None) -> BCOO:
        """Axes permuted (reversed by default); batch axes stay among batch axes and dense
        among dense, as in jax."""
        perm = tuple(range(self.ndim))[::-1] if axes is None else tuple(axes)
        return bcoo_transpose(self, permutation=perm)

    def sum(self, axis: int | Sequence[int] | None = None):
        """Sum over `axis` (all by default): a BCOO, or a dense scalar when every axis is
        summed (as jax's sparsified `x.sum()`)."""
        axes = range(self.ndim) if axis is None else \
            (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(_normalize_axis(a, self.ndim, "BCOO.sum") for a in axes)
        out = bcoo_reduce_sum(self, axes=axes)
        return out.data.sum() if out.shape == () else out

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> BCOO:
        """Duplicate indices summed, indices sorted, and (remove_zeros) explicit zeros dropped;
        nse as in bcoo_sum_duplicates."""
        if remove_zeros:
            return bcoo_eliminate_zeros(self, nse=nse)
        return bcoo_sum_duplicates(self, nse=nse)

    def reshape(self, *args, **kwargs) -> BCOO:
        """The array reshaped (bcoo_reshape: batch and sparse dims each among themselves);
        `new_sizes` as varargs or one tuple, -1 allowed once, as ndarray.reshape."""
        from fnad.experimental.sparse._structure import bcoo_reshape
        new = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
        new = kwargs.pop("new_sizes", new)
        new = list(operator.index(n) for n in new)
        if new.count(-1) > 1:
            raise ValueError(f"BCOO.reshape: at most one -1 in {tuple(new)}")
        if -1 in new:
            known = math.prod(n for n in new if n != -1)
            new[new.index(-1)] = self.size // known if known else 0
        return bcoo_reshape(self, new_sizes=tuple(new), **kwargs)

    def update_layout(self, *, n_batch: int | None = None, n_dense: int | None = None,
                      on_inefficient: str | None = "error") -> BCOO:
        """bcoo_update_layout(self, ...)."""
        from fnad.experimental.sparse._structure import bcoo_update_layout
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense,
                                  on_inefficient=on_inefficient)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense: int = 0,
                          n_batch: int = 0) -> BCOO:
        """A BCOO of a scipy.sparse matrix (its COO entries, duplicates kept), then laid out
        with n_batch / n_dense as bcoo_update_layout (on_inefficient=None)."""
        coo = mat.tocoo()
        idx = np.stack([coo.row, coo.col], axis=-1).astype(
            np.int32 if index_dtype is None else index_dtype)
        out = cls((jnp.asarray(coo.data), jnp.asarray(idx)), shape=coo.shape)
        if n_batch or n_dense:
            out = out.update_layout(n_batch=n_batch, n_dense=n_dense, on_inefficient=None)
        return out

    def sort_indices(self) -> BCOO:
        """The entries reordered so indices are lexicographically sorted per batch."""
        return bcoo_sort_indices(self)

    def astype(self, dtype) -> BCOO:
        return self._with_data(self.data.astype(dtype))

    # -- arithmetic (the products live in _products.py)
    def __neg__(self) -> BCOO:
        return self._with_data(-self.data)

    def __pos__(self) -> BCOO:
        return self

    def __matmul__(self, other):
        from fnad.experimental.sparse import _products
        return _products.matmul(self, other)

    def __rmatmul__(self, other):
        from fnad.experimental.sparse import _products
        return _products.matmul(other, self)

    def __mul__(self, other):
        from fnad.experimental.sparse import _products
        return _products.multiply(self, other)

    __rmul__ = __mul__

    def __add__(self, other):
        from fnad.experimental.sparse import _products
        return _products.add(self, other)

    __radd__ = __add__

    def __sub__(self, other):
        from fnad.experimental.sparse import _products
        return _products.add(self, -other)

    def __rsub__(self, other):
        from fnad.experimental.sparse import _products
        return _products.add(-self, other)

    def __truediv__(self, other):
        from fnad.experimental.sparse import _products
        return _products.divide(self, other)

    def __pow__(self, exponent):
        """Each stored entry to a positive scalar power (implicit zeros stay 0)."""
        if not isinstance(exponent, (int, float, np.integer, np.floating)) or exponent <= 0:
            raise ValueError(f"BCOO ** {exponent!r}: the exponent must be a positive scalar "
                             "(0 ** p is 0 only for p > 0)")
        return self._with_data(self.data ** exponent)

    def __abs__(self) -> BCOO:
        return self._with_data(abs(self.data))


tree_util.register_pytree_node(BCOO, BCOO.tree_flatten, BCOO.tree_unflatten)


def _normalize_axis(a, ndim: int, what: str) -> int:
    a = operator.index(a)
    if not -ndim <= a < ndim:
        raise ValueError(f"{what}: axis {a} is out of bounds for an array of rank {ndim}")
    return a % ndim


def todense(arr):
    """A dense array: a sparse array (any JAXSparse format) converted, anything else through
    jnp.asarray."""
    return arr.todense() if hasattr(arr, "todense") else jnp.asarray(arr)


def _check_bcoo(mat, what: str) -> None:
    check_format(mat, BCOO, what, "array")


# ---- fromdense / todense / extract ---------------------------------------------------------
def bcoo_fromdense(mat, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype=np.int32) -> BCOO:
    """The nonzero entries of `mat` [*B, *S, *D] as a BCOO with n_batch batch and n_dense
    dense dims (a dense block is stored when any of its elements is nonzero).

    Entries are taken in row-major order; nse (per batch position) defaults to the largest
    count of nonzeros, which needs concrete values: under jit / vmap pass nse. A smaller nse
    keeps the first nse entries; a larger one pads (data 0, indices = the sparse shape).
    Differentiable with respect to `mat` (a gather at the found indices).
    """
    mat = jnp.asarray(mat)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    n_sparse = mat.ndim - n_batch - n_dense
    if n_batch < 0 or n_dense < 0 or n_sparse < 0:
        raise ValueError(f"bcoo_fromdense: n_batch={n_batch} and n_dense={n_dense} must be "
                         f"nonnegative with sum at most mat.ndim={mat.ndim}")
    index_dtype = dtypes.canonicalize_dtype(index_dtype)
    if not dtypes.is_int(index_dtype):
        raise ValueError(f"bcoo_fromdense: index_dtype must be an integer type, got "
                         f"{index_dtype}")
    B = mat.shape[:n_batch]
    sparse_shape = mat.shape[n_batch:n_batch + n_sparse]
    S = math.prod(sparse_shape)
    mask = mat != 0
    if n_dense:
        mask = jnp.any(mask, axis=tuple(range(n_batch + n_sparse, mat.ndim)))
    mask = mask.reshape((*B, S))                                     # [*B, S]
    counts = jnp.sum(mask, axis=-1, dtype=np.int32)                  # [*B]
    if nse is None:
        nse = 0 if counts.size == 0 else _concrete_int(
            jnp.max(counts), "bcoo_fromdense: nse (the number of nonzeros)")
    nse = _concrete_int(nse, "bcoo_fromdense: nse")
    if nse < 0:
        raise ValueError(f"bcoo_fromdense: nse must be nonnegative, got {nse}")
    valid = np.arange(nse, dtype=np.int32) < counts[..., None]       # [*B, nse]
    if S and nse:
        # each nonzero's rank among its batch entry's nonzeros is its slot; beyond nse: dropped
        slot = jnp.where(mask, jnp.cumsum(mask, axis=-1, dtype=np.int32) - 1, nse)
        flat = jnp.full((*B, nse), S, np.int32).at[(*_batch_iotas(B, 1), slot)].set(
            jnp.broadcast_to(np.arange(S, dtype=np.int32), (*B, S)), mode="drop",
            unique_indices=True)                                     # [*B, nse] flat index
    else:
        flat = jnp.full((*B, nse), S, np.int32)
    cols, stride = [], S
    for s in sparse_shape:
        stride //= max(s, 1)
        col = (flat // max(stride, 1)) % max(s, 1)
        cols.append(jnp.where(valid, col, s))
    indices = (jnp.stack(cols, axis=-1) if cols else
               jnp.zeros((*B, nse, 0), np.int32)).astype(index_dtype)   # [*B, nse, n_sparse]
    data = _extract(indices, mat, Layout(n_batch, n_sparse, n_dense, nse))
    data = jnp.where(valid.reshape(valid.shape + (1,) * n_dense), data, 0)
    return BCOO((data.astype(mat.dtype), indices), shape=mat.shape, indices_sorted=True,
                unique_indices=True)


def _extract(indices, arr, layout: Layout):
    """arr's elements (blocks) at the BCOO `indices`: [*B, nse, *D]; 0 at padding."""
    nb, ns, nse = layout.n_batch, layout.n_sparse, layout.nse
    B, D = arr.shape[:nb], arr.shape[nb + ns:]
    index = (*_batch_iotas(B, 1), *(indices[..., j] for j in range(ns)))
    if not index:
        out = arr[None]
    else:
        out = arr.at[index].get(mode="fill", fill_value=0)
    return jnp.broadcast_to(out, (*B, nse, *D))


def bcoo_extract(sparr: BCOO, arr) -> BCOO:
    """A BCOO with sparr's indices holding arr's values there (arr of sparr's shape).
    Unlike jax (assume_unique=False) duplicate indices each get the full value."""
    _check_bcoo(sparr, "bcoo_extract")
    arr = jnp.asarray(arr)
    if tuple(arr.shape) != sparr.shape:
        raise ValueError(f"bcoo_extract: the dense array's shape {tuple(arr.shape)} differs "
                         f"from the sparse array's {sparr.shape}")
    return sparr._with_data(_extract(sparr.indices, arr, sparr._layout()))


def bcoo_todense(mat: BCOO):
    """The dense array [*shape] of `mat`: its entries scatter-added, padding dropped."""
    _check_bcoo(mat, "bcoo_todense")
    layout = mat._layout()
    nb, ns = layout.n_batch, layout.n_sparse
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, layout)
    if ns == 0:                               # one block per batch position: the entries' sum
        return jnp.broadcast_to(jnp.sum(data, axis=nb, dtype=data.dtype), mat.shape)
    if 0 in mat.shape[nb:nb + ns]:            # a size-0 sparse dim: every entry is padding
        return jnp.zeros(mat.shape, data.dtype)
    index = (*_batch_iotas(mat.shape[:nb], 1), *(indices[..., j] for j in range(ns)))
    return jnp.zeros(mat.shape, data.dtype).at[index].add(data, mode="drop")


# ---- transpose / reduce_sum ----------------------------------------------------------------
def bcoo_transpose(mat: BCOO, *, permutation: Sequence[int]) -> BCOO:
    """mat with its axes permuted; batch axes must map to batch axes and dense to dense."""
    _check_bcoo(mat, "bcoo_transpose")
    perm = tuple(operator.index(p) for p in permutation)
    nb, ns, nd, _ = mat._layout()
    if sorted(perm) != list(range(mat.ndim)):
        raise ValueError(f"bcoo_transpose: permutation {perm} is not a permutation of the "
                         f"axes of shape {mat.shape}")
    batch_perm, sparse_perm = perm[:nb], [p - nb for p in perm[nb:nb + ns]]
    dense_perm = [p - nb - ns for p in perm[nb + ns:]]
    if sorted(batch_perm) != list(range(nb)) or sorted(dense_perm) != list(range(nd)):
        raise NotImplementedError(
            f"bcoo_transpose: permutation {perm} moves axes between the batch ({nb}), sparse "
            f"({ns}) and dense ({nd}) groups; only permutations within each group are "
            "supported (as jax)")
    data = jnp.transpose(mat.data, (*batch_perm, nb, *(nb + 1 + d for d in dense_perm)))
    indices = jnp.transpose(mat.indices, (*batch_perm, nb, nb + 1))
    if sparse_perm != list(range(ns)):
        indices = jnp.take(indices, np.asarray(sparse_perm, np.int32), axis=-1)
    same_sparse = sparse_perm == list(range(ns))
    return BCOO((data, indices), shape=tuple(mat.shape[p] for p in perm),
                indices_sorted=mat.indices_sorted and same_sparse,
                unique_indices=mat.unique_indices)


def bcoo_reduce_sum(mat: BCOO, *, axes: Sequence[int]) -> BCOO:
    """mat summed over `axes`, still a BCOO: dense axes are summed in data, sparse axes drop
    their index column (the entries then add up), batch axes fold into nse."""
    _check_bcoo(mat, "bcoo_reduce_sum")
    layout = mat._layout()
    nb, ns, _, nse = layout
    axes = sorted({_normalize_axis(a, mat.ndim, "bcoo_reduce_sum") for a in axes})
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, layout)
    dense_axes = tuple(a - ns + 1 for a in axes if a >= nb + ns)     # data's axis numbers
    if dense_axes:
        data = jnp.sum(data, axis=dense_axes)
    if ns:                                    # padding would become a real entry: zero it
        ok = jnp.all(indices < _fill_value(mat.shape, layout, indices.dtype), axis=-1)
        data = jnp.where(ok.reshape(ok.shape + (1,) * (data.ndim - ok.ndim)), data, 0)
    keep = [j for j in range(ns) if nb + j not in axes]
    indices = jnp.take(indices, np.asarray(keep, np.int32), axis=-1) if keep else \
        jnp.zeros((*indices.shape[:-1], 0), indices.dtype)
    batch_axes = [a for a in axes if a < nb]
    kept_batch = [a for a in range(nb) if a not in batch_axes]
    if batch_axes:                            # [*kept, *summed, nse, ...] -> [*kept, n*nse, ...]
        order = (*kept_batch, *batch_axes)
        data = jnp.transpose(data, (*order, *range(nb, data.ndim)))
        indices = jnp.transpose(indices, (*order, nb, nb + 1))
        new_nse = nse * math.prod(mat.shape[a] for a in batch_axes)
        kept_shape = tuple(mat.shape[a] for a in kept_batch)
        data = data.reshape((*kept_shape, new_nse, *data.shape[nb + 1:]))
        indices = indices.reshape((*kept_shape, new_nse, indices.shape[-1]))
    out_shape = tuple(s for a, s in enumerate(mat.shape) if a not in axes)
    return BCOO((data, indices), shape=out_shape)


# ---- sorting and duplicates ----------------------------------------------------------------
def _flat_batch(data, indices, shape, layout: Layout):
    """data [N, nse, *D] and indices [N, nse, n_sparse], N the batch size, after broadcasting."""
    data, indices = _broadcast_batch(data, indices, shape, layout)
    N = math.prod(shape[:layout.n_batch])
    return (data.reshape((N, *data.shape[layout.n_batch:])),
            indices.reshape((N, *indices.shape[layout.n_batch:])))


def _sort_rows(indices):
    """indices [N, nse, n_sparse] sorted lexicographically per row, and the permutation."""
    N, nse, ns = indices.shape
    cols = [indices[..., j] for j in range(ns)]
    iota = lax.broadcasted_iota(np.int32, (N, nse), 1)
    *cols, perm = lax.sort((*cols, iota), dimension=1, num_keys=ns)
    return jnp.stack(cols, axis=-1), perm


def _permute_entries(data, perm):
    """data [N, nse, *D] reordered along nse by perm [N, nse]."""
    return jnp.take_along_axis(data, perm.reshape(perm.shape + (1,) * (data.ndim - 2)), axis=1)


def bcoo_sort_indices(mat: BCOO) -> BCOO:
    """mat's entries reordered so that each batch position's indices are in lexicographic
    order (padding, the largest index, last). Batch dims of data/indices are broadcast."""
    _check_bcoo(mat, "bcoo_sort_indices")
    layout = mat._layout()
    if layout.n_sparse == 0:
        return mat
    B = mat.shape[:layout.n_batch]
    data, indices = _flat_batch(mat.data, mat.indices, mat.shape, layout)
    indices, perm = _sort_rows(indices)
    data = _permute_entries(data, perm)
    return BCOO((data.reshape((*B, *data.shape[1:])), indices.reshape((*B, *indices.shape[1:]))),
                shape=mat.shape, indices_sorted=True, unique_indices=mat.unique_indices)


def bcoo_sum_duplicates(mat: BCOO, nse: int | None = None) -> BCOO:
    """mat with the entries at equal indices summed into one, indices sorted.

    nse (per batch position) defaults to the largest number of distinct indices, which needs
    concrete values: under jit / vmap pass nse. A larger nse pads (data 0, indices = the
    sparse shape); a smaller one drops the last entries. Differentiable with respect to data
    (the sums are a scatter-add).
    """
    _check_bcoo(mat, "bcoo_sum_duplicates")
    layout = mat._layout()
    nb, ns = layout.n_batch, layout.n_sparse
    B, D = mat.shape[:nb], mat.shape[nb + ns:]
    data, indices = _flat_batch(mat.data, mat.indices, mat.shape, layout)
    N, old_nse = indices.shape[:2]
    if ns == 0:                               # every entry is at the same (empty) index
        data = jnp.sum(data, axis=1, keepdims=True)
        nse = 1 if nse is None else _concrete_int(nse, "bcoo_sum_duplicates: nse")
        data = _resize_nse(data, nse)
        out = BCOO((data.reshape((*B, nse, *D)), jnp.zeros((*B, nse, 0), indices.dtype)),
                   shape=mat.shape, indices_sorted=True, unique_indices=True)
        return out
    fill = _fill_value(mat.shape, layout, indices.dtype)
    indices = jnp.where(jnp.any(indices >= fill, axis=-1, keepdims=True), fill, indices)
    srt, perm = _sort_rows(indices)                                  # [N, nse, ns], [N, nse]
    if old_nse:
        new = jnp.concatenate([jnp.ones((N, 1), bool),
                               jnp.any(srt[:, 1:] != srt[:, :-1], axis=-1)], axis=1)
        seg = jnp.cumsum(new, axis=1, dtype=np.int32) - 1             # [N, nse] group id
    else:
        seg = jnp.zeros((N, 0), np.int32)
    if nse is None:
        n_unique = seg[:, -1] + 1 - jnp.any(srt[:, -1] == fill, axis=-1)  # padding group
        nse = 0 if N * old_nse == 0 else _concrete_int(
            jnp.max(n_unique), "bcoo_sum_duplicates: nse (the number of distinct indices)")
    nse = _concrete_int(nse, "bcoo_sum_duplicates: nse")
    rows = np.arange(N, dtype=np.int32)[:, None]
    out_indices = jnp.broadcast_to(fill, (N, nse, ns))
    out_data = jnp.zeros((N, nse, *D), data.dtype)
    if old_nse and nse:
        out_indices = out_indices.at[rows, seg].set(srt, mode="drop")
        mapping = jnp.zeros((N, old_nse), np.int32).at[rows, perm].set(seg, unique_indices=True)
        out_data = out_data.at[rows, mapping].add(data, mode="drop")   # entry -> its group
    return BCOO((out_data.reshape((*B, nse, *D)), out_indices.reshape((*B, nse, ns))),
                shape=mat.shape, indices_sorted=True, unique_indices=True)


def _resize_nse(data, nse: int):
    """data [N, n, ...] cut or zero-padded to [N, nse, ...] (axis 1)."""
    n = data.shape[1]
    if nse <= n:
        return data[:, :nse]
    pad = [(0, 0)] * data.ndim
    pad[1] = (0, nse - n)
    return jnp.pad(data, pad)


def bcoo_eliminate_zeros(mat: BCOO, nse: int | None = None) -> BCOO:
    """bcoo_sum_duplicates after marking the entries whose data is all zero as padding."""
    _check_bcoo(mat, "bcoo_eliminate_zeros")
    layout = mat._layout()
    nb = layout.n_batch
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, layout)
    zero = jnp.all(data == 0, axis=tuple(range(nb + 1, data.ndim)))   # [*B, nse]
    indices = jnp.where(zero[..., None], _fill_value(mat.shape, layout, indices.dtype), indices)
    return bcoo_sum_duplicates(BCOO((data, indices), shape=mat.shape), nse=nse)


# ---- constructors --------------------------------------------------------------------------
def empty(shape: Sequence[int], dtype=None, index_dtype="int32", sparse_format: str = "bcoo",
          *, n_batch: int = 0, n_dense: int = 0, nse: int = 0):
    """An all-zero sparse array of `shape`: a BCOO (the default) or BCSR with nse padding
    entries per batch position, or a COO / CSR / CSC matrix with none."""
    if sparse_format != "bcoo":
        return _other_format("empty", sparse_format, ("bcsr", "coo", "csr", "csc"))._empty(
            shape, dtype=dtype, index_dtype=index_dtype,
            **_layout_kwargs("empty", sparse_format, n_batch=n_batch, n_dense=n_dense, nse=nse))
    shape = tuple(operator.index(s) for s in shape)
    n_sparse = len(shape) - n_batch - n_dense
    if min(n_batch, n_dense, n_sparse, nse) < 0:
        raise ValueError(f"empty: invalid shape={shape}, n_batch={n_batch}, "
                         f"n_dense={n_dense}, nse={nse}")
    B, S, D = shape[:n_batch], shape[n_batch:n_batch + n_sparse], shape[n_batch + n_sparse:]
    index_dtype = dtypes.canonicalize_dtype(index_dtype)
    data = jnp.zeros((*B, nse, *D), dtype)
    indices = jnp.broadcast_to(np.asarray(S, index_dtype), (*B, nse, n_sparse))
    return BCOO((data, indices), shape=shape, indices_sorted=True, unique_indices=True)


def _other_format(what: str, sparse_format, others: tuple):
    """The class of a sparse format other than BCOO (as named in jax)."""
    from fnad.experimental.sparse.bcsr import BCSR
    from fnad.experimental.sparse.coo import COO
    from fnad.experimental.sparse.csr import CSC, CSR
    classes = {"bcsr": BCSR, "coo": COO, "csr": CSR, "csc": CSC}
    if sparse_format not in others:
        raise ValueError(f"{what}: sparse_format={sparse_format!r} not recognized; must be one "
                         f"of {['bcoo', *others]}")
    return classes[sparse_format]


def _layout_kwargs(what: str, sparse_format: str, **kwargs) -> dict:
    """The BCOO layout arguments a format takes (BCSR: all; COO/CSR/CSC: none but defaults)."""
    if sparse_format == "bcsr":
        return kwargs
    given = {k: v for k, v in kwargs.items() if v}
    if given:
        raise TypeError(f"{what}: sparse_format={sparse_format!r} is a plain 2-D matrix and "
                        f"takes no {', '.join(f'{k}=' for k in given)}")
    return {}


def eye(N: int, M: int | None = None, k: int = 0, dtype=None, index_dtype="int32",
        sparse_format: str = "bcoo", *, n_batch: int = 0, n_dense: int = 0):
    """The [N, M] matrix with ones on diagonal k, as a BCOO (jax.experimental.sparse.eye),
    or a COO / CSR / CSC for those sparse_format names.
    With n_batch=1 each row stores its one entry (padding where the diagonal leaves the
    matrix); n_batch=2 or n_dense>0 store the zeros too, as jax."""
    N = _concrete_int(N, "eye: N")
    M = N if M is None else _concrete_int(M, "eye: M")
    k = _concrete_int(k, "eye: k")
    if sparse_format != "bcoo":
        _layout_kwargs("eye", sparse_format, n_batch=n_batch, n_dense=n_dense)
        return _other_format("eye", sparse_format, ("coo", "csr", "csc"))._eye(
            N, M, k, dtype=dtype, index_dtype=index_dtype)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > 2:
        raise ValueError(f"eye: invalid n_batch={n_batch}, n_dense={n_dense} for a matrix")
    index_dtype = dtypes.canonicalize_dtype(index_dtype)
    diag = min(N, M - k) if k > 0 else min(N + k, M)
    if diag <= 0:
        return empty((N, M), dtype, index_dtype, n_batch=n_batch, n_dense=n_dense)
    if n_dense > 0 or n_batch > 1:
        return bcoo_fromdense(jnp.eye(N, M, k, dtype=dtype), n_batch=n_batch,
                              n_dense=n_dense, index_dtype=index_dtype)
    if n_batch == 0:
        i = np.arange(diag) + max(-k, 0)
        indices = np.stack([i, i + k], axis=-1).astype(index_dtype)
        data = jnp.ones(diag, dtype)
    else:                                     # row r stores column r + k, if that exists
        col = np.arange(N) + k
        inside = (col >= 0) & (col < M)
        indices = np.where(inside, col, M).astype(index_dtype)[:, None, None]
        data = jnp.asarray(inside[:, None]).astype(jnp.ones((), dtype).dtype)
    return BCOO((data, jnp.asarray(indices)), shape=(N, M), indices_sorted=True,
                unique_indices=True)
