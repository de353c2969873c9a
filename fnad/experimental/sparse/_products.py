"""Products of BCOO arrays: bcoo_dot_general (sparse x dense, dense x sparse), the `@`
operator's matmul rules, and elementwise multiplication by scalars, dense arrays
(bcoo_multiply_dense) and other BCOO arrays (bcoo_multiply_sparse).

Sparse x dense, for lhs [*B, *S, *D] stored as (data [*B, nse, *D], indices [*B, nse, S]):
every stored entry picks the matching slice of the dense operand (a gather at its batch
position and its contracted sparse coordinates), one batched dot_general multiplies the
blocks and contracts the dense dims, and the products are scatter-added at the entry's batch
position and free sparse coordinates. Padding entries gather zeros (mode="fill") or are
dropped by the scatter, so they contribute nothing.

Imports fnad.numpy, fnad.lax and the BCOO module only.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax
from fnad.core import ShapeDtypeStruct
from fnad.experimental.sparse.bcoo import (BCOO, _batch_iotas, _broadcast_batch, _check_bcoo,
                                           _validate)

__all__ = ["bcoo_dot_general", "bcoo_dot_general_sampled", "bcoo_multiply_dense",
           "bcoo_multiply_sparse", "bcoo_spdot_general", "matmul", "multiply"]


def _int_tuple(x) -> tuple:
    return tuple(operator.index(i) for i in (x if isinstance(x, (tuple, list)) else (x,)))


def _dnums(dimension_numbers):
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("bcoo_dot_general: dimension_numbers must be ((lhs_contracting, "
                        "rhs_contracting), (lhs_batch, rhs_batch)), got "
                        f"{dimension_numbers!r}") from None
    return (_int_tuple(lc), _int_tuple(rc)), (_int_tuple(lb), _int_tuple(rb))


def _out_aval(lhs_shape, lhs_dtype, rhs, dnums, preferred_element_type):
    """lax.dot_general's output shape and dtype for these operands (its errors if they do not
    fit: mismatched contracting or batch sizes, bad dimension numbers)."""
    f = functools.partial(lax.dot_general, dimension_numbers=dnums,
                          preferred_element_type=preferred_element_type)
    return fnad.eval_shape(f, ShapeDtypeStruct(tuple(lhs_shape), lhs_dtype),
                           ShapeDtypeStruct(tuple(rhs.shape), rhs.dtype))


def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None):
    """lax.dot_general where lhs or rhs is a BCOO (the other dense); the result is dense,
    with dot_general's dimension order (batch, lhs free, rhs free).

    The sparse operand's dot_general batch dimensions must be among its n_batch batch
    dimensions (as jax). Unlike jax, contracting its dense dimensions is allowed. Two BCOO
    operands give a BCOO (bcoo_spdot_general). `precision` is ignored.
    """
    del precision
    dnums = _dnums(dimension_numbers)
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        return bcoo_spdot_general(lhs, rhs, dimension_numbers=dnums,
                                  preferred_element_type=preferred_element_type)
    if isinstance(lhs, BCOO):
        return _dot_sparse_dense(lhs, jnp.asarray(rhs), dnums, preferred_element_type)
    if isinstance(rhs, BCOO):
        (lc, rc), (lb, rb) = dnums
        out = _dot_sparse_dense(rhs, jnp.asarray(lhs), ((rc, lc), (rb, lb)),
                                preferred_element_type)   # [batch, rhs free, lhs free]
        n_b, n_rfree = len(lb), rhs.ndim - len(rc) - len(rb)
        perm = (*range(n_b), *range(n_b + n_rfree, out.ndim), *range(n_b, n_b + n_rfree))
        return jnp.transpose(out, perm)
    return lax.dot_general(lhs, rhs, dnums, preferred_element_type=preferred_element_type)


def _dot_sparse_dense(mat: BCOO, rhs, dnums, preferred_element_type):
    """dot_general(mat, rhs) for a BCOO mat and a dense rhs (see the module doc)."""
    aval = _out_aval(mat.shape, mat.dtype, rhs, dnums, preferred_element_type)
    layout = _validate(mat.data, mat.indices, mat.shape)
    nb, ns = layout.n_batch, layout.n_sparse
    (lc, rc), (lb, rb) = dnums
    if any(d >= nb for d in lb):
        raise NotImplementedError(
            f"bcoo_dot_general: the sparse operand's batch dimensions {lb} must be among its "
            f"n_batch={nb} batch dimensions (shape {mat.shape}); use n_batch={max(lb) + 1} "
            "in fromdense")
    pairs = list(zip(lc, rc))
    cb = [(l, r) for l, r in pairs if l < nb]                  # contracted batch dims
    cs = [(l, r) for l, r in pairs if nb <= l < nb + ns]       # contracted sparse dims
    cd = [(l, r) for l, r in pairs if l >= nb + ns]            # contracted dense dims
    fb = [d for d in range(nb) if d not in lb and d not in lc]
    fs = [d for d in range(nb, nb + ns) if d not in lc]
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, layout)
    # batch dims in the order (dot batch, free, contracted): [*Bp, nse, ...]
    border = [*lb, *fb, *(l for l, _ in cb)]
    Bp = tuple(mat.shape[d] for d in border)
    nBp = len(border)
    data = jnp.transpose(data, (*border, *range(nb, data.ndim)))        # [*Bp, nse, *D]
    indices = jnp.transpose(indices, (*border, nb, nb + 1))             # [*Bp, nse, S]
    nse = indices.shape[nBp]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    cross = [*rb, *(r for _, r in cb), *(r for _, r in cs)]             # rhs dims gathered
    rhs = jnp.transpose(rhs, (*cross, *(r for _, r in cd), *rfree))
    iotas = _batch_iotas(Bp, 1)
    n_cb0 = len(lb) + len(fb)
    gather_index = [*iotas[:len(lb)], *iotas[n_cb0:],
                    *(indices[..., l - nb] for l, _ in cs)]
    data_cd = [nBp + 1 + (l - nb - ns) for l, _ in cd]                  # data's dense contracted
    if gather_index:
        full = (*Bp, nse)
        gather_index = [jnp.broadcast_to(i, full) for i in gather_index]
        g = rhs.at[tuple(gather_index)].get(mode="fill", fill_value=0)  # [*Bp, nse, *cd, *rfree]
        if cd:
            g_cd = [nBp + 1 + m for m in range(len(cd))]
            batch = list(range(nBp + 1))
            prod = lax.dot_general(data, g, ((data_cd, g_cd), (batch, batch)),
                                   preferred_element_type=preferred_element_type)
        else:                                 # per entry an outer product: no dot needed
            n_fd, n_rf = data.ndim - nBp - 1, g.ndim - nBp - 1
            prod = (data.astype(aval.dtype).reshape(data.shape + (1,) * n_rf)
                    * g.astype(aval.dtype).reshape(g.shape[:nBp + 1] + (1,) * n_fd
                                                   + g.shape[nBp + 1:]))
    else:                                     # nothing to gather: one plain contraction
        prod = lax.dot_general(data, rhs, ((data_cd, list(range(len(cd)))), ((), ())),
                               preferred_element_type=preferred_element_type)
    # prod: [*Bp, nse, *fd, *rfree]; out: [*lb, *fb, *fs, *fd, *rfree] (dot_general's order)
    if not fs:
        out = jnp.sum(prod, axis=tuple(range(n_cb0, nBp + 1)))
    else:
        scatter_index = (*iotas[:n_cb0], *(indices[..., d - nb] for d in fs))
        out = jnp.zeros(aval.shape, prod.dtype).at[scatter_index].add(prod, mode="drop")
    return out if out.dtype == aval.dtype else out.astype(aval.dtype)


# ---- the `@` operator ----------------------------------------------------------------------
def matmul(a, b):
    """a @ b where an operand is a BCOO (NumPy's matmul rules; two BCOO give a BCOO). Batch
    (leading) dimensions must be the BCOO's batch dimensions and equal on both sides, or
    present on one side only when the other is a vector or a matrix."""
    both = isinstance(a, BCOO) and isinstance(b, BCOO)
    sparse_lhs = isinstance(a, BCOO)
    a = a if sparse_lhs else jnp.asarray(a)
    b = jnp.asarray(b) if sparse_lhs and not both else b
    na, nbd = a.ndim, b.ndim
    if na == 0 or nbd == 0:
        raise ValueError(f"matmul: operands must be at least 1-D, got shapes {a.shape} and "
                         f"{b.shape}")
    if nbd == 1:                              # [..., K] @ [K] -> [...]
        return bcoo_dot_general(a, b, dimension_numbers=(([na - 1], [0]), ([], [])))
    if na == 1:                               # [K] @ [..., K, N] -> [..., N]
        return bcoo_dot_general(a, b, dimension_numbers=(([0], [nbd - 2]), ([], [])))
    if nbd == 2:                              # [..., M, K] @ [K, N] -> [..., M, N]
        return bcoo_dot_general(a, b, dimension_numbers=(([na - 1], [0]), ([], [])))
    if na == 2:                               # [M, K] @ [..., K, N]: dot gives [M, ..., N]
        out = bcoo_dot_general(a, b, dimension_numbers=(([1], [nbd - 2]), ([], [])))
        if isinstance(out, BCOO):                                     # both sparse
            return out.transpose((*range(1, nbd - 1), 0, nbd - 1))
        return jnp.moveaxis(out, 0, -2)
    if na != nbd or tuple(a.shape[:-2]) != tuple(b.shape[:-2]):
        raise NotImplementedError(
            f"matmul: batch dimensions {tuple(a.shape[:-2])} and {tuple(b.shape[:-2])} must "
            "be equal for a BCOO operand (no broadcasting)")
    batch = list(range(na - 2))
    return bcoo_dot_general(a, b, dimension_numbers=(([na - 1], [nbd - 2]), (batch, batch)))


# ---- elementwise products ------------------------------------------------------------------
def multiply(a, b):
    """a * b with a BCOO operand: a BCOO with the sparse operand's pattern (scalars, dense
    arrays broadcasting to its shape) or bcoo_multiply_sparse for two BCOO arrays."""
    if isinstance(b, BCOO) and not isinstance(a, BCOO):
        a, b = b, a
    if isinstance(b, BCOO):
        return bcoo_multiply_sparse(a, b)
    if not isinstance(b, (int, float, complex, bool, np.ndarray, np.generic)) and \
            not hasattr(b, "shape"):
        return NotImplemented
    return a._with_data(bcoo_multiply_dense(a, b))


def bcoo_multiply_dense(sp_mat: BCOO, v):
    """The data of sp_mat * v (v dense, broadcasting to sp_mat.shape): each stored entry times
    v at its position. Returns the data array [*B, nse, *D], as jax."""
    _check_bcoo(sp_mat, "bcoo_multiply_dense")
    data, picked = _dense_at_entries(sp_mat, v, "bcoo_multiply_dense")
    return data * picked


def divide(a: BCOO, b):
    """a / b for a BCOO a and a scalar or dense b broadcasting to a's shape: a BCOO with a's
    pattern (an implicit zero over b stays zero, as in jax's sparse division)."""
    if isinstance(b, BCOO):
        raise NotImplementedError("BCOO / BCOO is not supported (its implicit zeros would "
                                  "give 0/0); divide by a dense array or a scalar")
    data, picked = _dense_at_entries(a, b, "BCOO.__truediv__")
    return a._with_data(data / picked)


def _dense_at_entries(sp_mat: BCOO, v, what: str):
    """(data, v's values at each stored entry's position) for v dense, broadcasting to
    sp_mat.shape; both broadcast against [*B, nse, *D]."""
    v = jnp.asarray(v)
    if v.ndim == 0:
        return sp_mat.data, v
    shape = sp_mat.shape
    try:
        ok = np.broadcast_shapes(tuple(v.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{what}: the dense operand's shape {tuple(v.shape)} "
                         f"must broadcast to the sparse shape {shape}")
    layout = _validate(sp_mat.data, sp_mat.indices, shape)
    nb, ns = layout.n_batch, layout.n_sparse
    v = v.reshape((1,) * (len(shape) - v.ndim) + tuple(v.shape))
    data, indices = _broadcast_batch(sp_mat.data, sp_mat.indices, shape, layout)
    # v's batch and sparse coordinates of each entry (0 along v's size-1 dims)
    index = [i if v.shape[j] > 1 else np.zeros_like(i)
             for j, i in enumerate(_batch_iotas(shape[:nb], 1))]
    index += [indices[..., j] if v.shape[nb + j] > 1 else
              jnp.zeros(indices.shape[:-1], indices.dtype) for j in range(ns)]
    picked = v.at[tuple(index)].get(mode="fill", fill_value=0) if index else v[None]
    return data, picked                       # [*B, nse, *D] (v's dense dims broadcast)


def _same_layout(lhs: BCOO, rhs: BCOO, what: str):
    """(lhs's layout, (data, indices) of lhs, of rhs, batch dims broadcast) for two BCOO
    arrays of one shape and layout (n_batch, n_dense); an error naming `what` otherwise."""
    if lhs.shape != rhs.shape:
        raise ValueError(f"{what}: shapes {lhs.shape} and {rhs.shape} differ "
                         "(broadcasting is not supported)")
    ll = _validate(lhs.data, lhs.indices, lhs.shape)
    rl = _validate(rhs.data, rhs.indices, rhs.shape)
    if (ll.n_batch, ll.n_dense) != (rl.n_batch, rl.n_dense):
        raise NotImplementedError(
            f"{what}: layouts differ (n_batch {ll.n_batch} vs {rl.n_batch}, n_dense "
            f"{ll.n_dense} vs {rl.n_dense}); convert one with fromdense")
    return (ll, _broadcast_batch(lhs.data, lhs.indices, lhs.shape, ll),
            _broadcast_batch(rhs.data, rhs.indices, rhs.shape, rl))


def add(a, b):
    """a + b with a BCOO operand. Two BCOO arrays of one shape and layout: a BCOO holding
    both sides' entries (nse adds up; duplicates sum when densified), as jax's. A BCOO and a
    dense array or scalar: the dense sum, as jax."""
    if isinstance(a, BCOO) and isinstance(b, BCOO):
        la, (da, ia), (db, ib) = _same_layout(a, b, "BCOO + BCOO")
        dtype = jnp.result_type(da, db)
        nb = la.n_batch
        return BCOO((jnp.concatenate([da.astype(dtype), db.astype(dtype)], axis=nb),
                     jnp.concatenate([ia, ib.astype(ia.dtype)], axis=nb)), shape=a.shape)
    sp, other = (a, b) if isinstance(a, BCOO) else (b, a)
    if not isinstance(other, (int, float, complex, bool, np.ndarray, np.generic)) and \
            not hasattr(other, "shape"):
        return NotImplemented
    other_shape = tuple(np.shape(other))
    if np.broadcast_shapes(other_shape, sp.shape) != other_shape:
        raise NotImplementedError(
            f"BCOO + dense: the sum of a sparse array of shape {sp.shape} and a dense one of "
            f"shape {other_shape} would be a larger dense array; densify the sparse operand "
            "explicitly (.todense()) if that is meant (as jax, which refuses this too)")
    return (a.todense() if isinstance(a, BCOO) else a) + \
        (b.todense() if isinstance(b, BCOO) else b)


def bcoo_multiply_sparse(lhs: BCOO, rhs: BCOO) -> BCOO:
    """Elementwise product of two BCOO arrays of one shape and layout (n_batch, n_dense).

    Every pair of entries (one from each side, same batch position) with equal indices
    yields an entry; the others become padding. So the result has nse = lhs.nse * rhs.nse,
    as jax's. Differentiable with respect to both data arrays.
    """
    _check_bcoo(lhs, "bcoo_multiply_sparse")
    _check_bcoo(rhs, "bcoo_multiply_sparse")
    ll, (ld, li), (rd, ri) = _same_layout(lhs, rhs, "bcoo_multiply_sparse")
    nb, ns, nd = ll.n_batch, ll.n_sparse, ll.n_dense
    B, D = lhs.shape[:nb], lhs.shape[nb + ns:]
    n1, n2 = ll.nse, rhs.nse
    li2, ri2 = li[..., :, None, :], ri[..., None, :, :]                 # [*B, n1, 1 | n2, S]
    match = jnp.all(li2 == ri2, axis=-1)                              # [*B, n1, n2]
    expand = (Ellipsis,) + (None,) * nd
    ldx = jnp.expand_dims(ld, nb + 1)                                 # [*B, n1, 1, *D]
    rdx = jnp.expand_dims(rd, nb)                                     # [*B, 1, n2, *D]
    data = jnp.where(match[expand], ldx * rdx, 0).reshape((*B, n1 * n2, *D))
    fill = np.asarray(lhs.shape[nb:nb + ns], li.dtype)
    indices = jnp.where(match[..., None], jnp.broadcast_to(li2, (*B, n1, n2, ns)), fill)
    return BCOO((data, indices.reshape((*B, n1 * n2, ns))), shape=lhs.shape)


def bcoo_dot_general_sampled(A, B, indices, *, dimension_numbers):
    """The BCOO data of lax.dot_general(A, B) at the BCOO `indices` (a sampled dense-dense
    product, the transpose of a sparse product): [*batch, nse, *dense], 0 at padding.
    Computed as the dense product, then the entries picked (as jax's reference rule)."""
    from fnad.experimental.sparse.bcoo import Layout, _extract
    dnums = _dnums(dimension_numbers)
    prod = lax.dot_general(jnp.asarray(A), jnp.asarray(B), dnums)
    indices = jnp.asarray(indices)
    nb = indices.ndim - 2
    if nb < 0 or nb + indices.shape[-1] > prod.ndim:
        raise ValueError(f"bcoo_dot_general_sampled: indices of shape {tuple(indices.shape)} "
                         f"do not index the product's shape {tuple(prod.shape)} (indices are "
                         "[*batch, nse, n_sparse])")
    ns = indices.shape[-1]
    layout = Layout(nb, ns, prod.ndim - nb - ns, indices.shape[-2])
    return _extract(indices, prod, layout)


# ---- sparse x sparse -----------------------------------------------------------------------
def bcoo_spdot_general(lhs: BCOO, rhs: BCOO, *, dimension_numbers, precision=None,
                       preferred_element_type=None) -> BCOO:
    """lax.dot_general of two BCOO arrays, as a BCOO (jax's bcoo_spdot_general).

    Every pair of stored entries whose contracted indices agree gives one product, stored
    at (lhs free indices, rhs free indices); then duplicates are summed into
    nse = (lhs.nse if lhs keeps a sparse dim else 1) * (rhs.nse likewise), capped at the
    output's number of positions. As jax: no dense dims, batch dims must be batch dims of
    both and contracted dims sparse dims; the output's batch dims are the shared batch dims,
    then lhs's other batch dims, then rhs's. `precision` is ignored.
    """
    del precision
    _check_bcoo(lhs, "bcoo_spdot_general")
    _check_bcoo(rhs, "bcoo_spdot_general")
    dnums = _dnums(dimension_numbers)
    (lc, rc), (lb, rb) = dnums
    out = _out_aval(lhs.shape, lhs.dtype, ShapeDtypeStruct(rhs.shape, rhs.dtype), dnums,
                    preferred_element_type)
    L, R = lhs._layout(), rhs._layout()
    if L.n_dense or R.n_dense:
        raise NotImplementedError("bcoo_spdot_general: operands with dense dimensions are not "
                                  "supported (as in jax)")
    for name, batch, lay in (("lhs", lb, L), ("rhs", rb, R)):
        if any(d >= lay.n_batch for d in batch):
            raise NotImplementedError(f"bcoo_spdot_general: the {name} batch dims {batch} must "
                                      f"be among its {lay.n_batch} batch dimensions")
    for name, contract, lay in (("lhs", lc, L), ("rhs", rc, R)):
        if any(not lay.n_batch <= d < lay.n_batch + lay.n_sparse for d in contract):
            raise NotImplementedError(f"bcoo_spdot_general: the {name} contracting dims "
                                      f"{contract} must be sparse dimensions (as in jax)")
    if R.n_batch > len(rb) and L.n_sparse > len(lc):
        raise ValueError("bcoo_spdot_general: cannot have unused batch dims on rhs with unused "
                         "sparse dims on lhs (as in jax)")
    out_nb = L.n_batch + R.n_batch - len(lb)
    out_nse = ((L.nse if L.n_sparse > len(lc) else 1) *
               (R.nse if R.n_sparse > len(rc) else 1))
    out_nse = min(out_nse, math.prod(out.shape[out_nb:]))
    ldata, lind = _broadcast_batch(lhs.data, lhs.indices, lhs.shape, L)
    rdata, rind = _broadcast_batch(rhs.data, rhs.indices, rhs.shape, R)
    lperm = [*lb, *(d for d in range(L.n_batch) if d not in lb)]
    rperm = [*rb, *(d for d in range(R.n_batch) if d not in rb)]
    ldata = jnp.transpose(ldata, (*lperm, L.n_batch))
    lind = jnp.transpose(lind, (*lperm, L.n_batch, L.n_batch + 1))
    rdata = jnp.transpose(rdata, (*rperm, R.n_batch))
    rind = jnp.transpose(rind, (*rperm, R.n_batch, R.n_batch + 1))
    core = functools.partial(
        _spdot_unbatched, lhs_shape=lhs.shape[L.n_batch:], rhs_shape=rhs.shape[R.n_batch:],
        lhs_contract=[d - L.n_batch for d in lc], rhs_contract=[d - R.n_batch for d in rc],
        out_nse=out_nse, dtype=out.dtype)
    for _ in range(R.n_batch - len(rb)):
        core = fnad.vmap(core, in_axes=(None, None, 0, 0))
    for _ in range(L.n_batch - len(lb)):
        core = fnad.vmap(core, in_axes=(0, 0, None, None))
    for _ in range(len(lb)):
        core = fnad.vmap(core)
    data, indices = core(ldata, lind, rdata, rind)
    return BCOO((data, indices), shape=out.shape, indices_sorted=True, unique_indices=True)


def _spdot_unbatched(ldata, lind, rdata, rind, *, lhs_shape, rhs_shape, lhs_contract,
                     rhs_contract, out_nse, dtype):
    """bcoo_spdot_general of two unbatched BCOO (data [nse], indices [nse, n_sparse])."""
    from fnad.experimental.sparse.bcoo import bcoo_sum_duplicates
    lfree = [d for d in range(len(lhs_shape)) if d not in lhs_contract]
    rfree = [d for d in range(len(rhs_shape)) if d not in rhs_contract]
    li, ri = lind[:, np.asarray(lhs_contract, int)], rind[:, np.asarray(rhs_contract, int)]
    lsize = np.asarray([lhs_shape[d] for d in lhs_contract], li.dtype)
    rsize = np.asarray([rhs_shape[d] for d in rhs_contract], ri.dtype)
    match = jnp.all(li[:, None] == ri[None, :], axis=-1)               # [nse_l, nse_r]
    match = match & jnp.all(li < lsize, axis=-1)[:, None] & jnp.all(ri < rsize, axis=-1)[None]
    prod = ldata.astype(dtype)[:, None] * rdata.astype(dtype)[None, :]
    data = jnp.where(match, prod, jnp.zeros((), dtype)).reshape(-1)
    itype = jnp.result_type(lind, rind)
    lj, rj = lind[:, np.asarray(lfree, int)], rind[:, np.asarray(rfree, int)]
    nl, nr = lind.shape[0], rind.shape[0]
    indices = jnp.concatenate([jnp.broadcast_to(lj[:, None].astype(itype), (nl, nr, len(lfree))),
                               jnp.broadcast_to(rj[None].astype(itype), (nl, nr, len(rfree)))],
                              axis=-1).reshape(nl * nr, len(lfree) + len(rfree))
    out_shape = (*(lhs_shape[d] for d in lfree), *(rhs_shape[d] for d in rfree))
    out = bcoo_sum_duplicates(BCOO((data, indices), shape=out_shape), nse=out_nse)
    return out.data, out.indices
