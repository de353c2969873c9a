"""bcoo_conv_general_dilated: lax.conv_general_dilated with BCOO operands
(jax.experimental.sparse.bcoo_conv_general_dilated), sparse result.

Math → code. In the canonical layout lhs [N, C, *S], rhs [O, I, *K], out [N', O, *Y]
(fnad.lax.conv_general_dilated's docstring), the lhs element at (n, c, x) times the rhs
element at (o, i, k) lands, if at all, at output (n', o, y) with, per spatial dim,

    y·stride = x·lhs_dilation + pad_lo - k·rhs_dilation        (an integer y in [0, Y))

and the channels matching: with G feature groups, c = g·I + i where g = o // (O/G); with
B batch groups (N' = N/B), lhs batch group n // N' = o // (O/B), and n' = n mod N'.

The result stores one entry per product that can land: every (lhs entry, rhs entry) pair
when both are sparse; when one operand is dense, each stored entry of the other times
every element of the dense operand its channel meets (lhs entry (n, c, x): the rhs block
[O/G or O/B, *K] at input feature c mod I; rhs entry (o, i, k): the lhs block [N', *S] at
feature c and batch group of o). Products that land outside the output are padding;
products landing on one output add up when densified. All of it is fnad.numpy arithmetic
and gathers, so grad (data and dense operands), vmap and jit work. Imports fnad.numpy,
fnad.lax, fnad.tracing and this package's bcoo / _structure.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import core, lax
from fnad.experimental.sparse._base import JAXSparse
from fnad.experimental.sparse.bcoo import BCOO
from fnad.tracing import make_jaxpr

__all__ = ["bcoo_conv_general_dilated"]

_NAME = "bcoo_conv_general_dilated"


def _conv_params(lhs, rhs, kwargs):
    """fnad.lax.conv_general_dilated's checks and normalized parameters (padding pairs,
    ConvDimensionNumbers, ...) at the operands' shapes, and the output's aval."""
    args = [core.ShapeDtypeStruct(tuple(x.shape), x.dtype) for x in (lhs, rhs)]
    closed = make_jaxpr(lambda a, b: lax.conv_general_dilated(a, b, **kwargs))(*args)
    (eqn,) = closed.jaxpr.eqns
    return eqn.params, closed.out_avals[0]


def _entries(x, spec, index_dtype):
    """x's stored entries: values [E], canonical coordinates (batch/out-feature,
    feature/in-feature, spatial...) as a list of [E] arrays, and validity [E] (False at
    padding). The BCOO is relaid to n_batch = n_dense = 0."""
    from fnad.experimental.sparse._structure import bcoo_update_layout
    flat = bcoo_update_layout(x, n_batch=0, n_dense=0, on_inefficient=None)
    coords = flat.indices.astype(index_dtype)                                 # [E, ndim]
    valid = jnp.all(coords < np.asarray(x.shape, index_dtype), axis=-1)
    coords = jnp.where(valid[:, None], coords, 0)        # padding: in bounds for the gathers
    return flat.data, [coords[:, d] for d in spec], valid


def _iota(shape, axis, dtype):
    return lax.broadcasted_iota(dtype, shape, axis)


class _Pairs(NamedTuple):
    """The products to store, as arrays broadcasting to one pair shape: value, validity,
    and canonical coordinates n' (output batch), o, x (lhs spatial), k (rhs spatial);
    `perm` orders the pair shape's axes lhs-major (jax's order of the entries)."""
    shape: tuple
    value: Any
    ok: Any
    n_out: Any
    o: Any
    xs: list
    ks: list
    perm: tuple


def _both_sparse(lhs, rhs, g, index_dtype) -> _Pairs:
    """Every (lhs entry, rhs entry) pair: P = [El, Er]."""
    vl, (n, c, *xs), okl = _entries(lhs, g["lspec"], index_dtype)
    vr, (o, i, *ks), okr = _entries(rhs, g["rspec"], index_dtype)
    col, row = (lambda a: a[:, None]), (lambda a: a[None, :])
    n, c, o, i = col(n), col(c), row(o), row(i)
    I, Og, Ob, Nb = g["I"], g["O"] // g["G"], g["O"] // g["B"], g["N_out"]
    ok = col(okl) & row(okr) & (c // I == o // Og) & (c % I == i) & (n // Nb == o // Ob)
    return _Pairs((vl.shape[0], vr.shape[0]), col(vl) * row(vr), ok, n % Nb, o,
                  [col(x) for x in xs], [row(k) for k in ks], (0, 1))


def _group(index, size_per_group, groups):
    """The group of `index` among `groups` groups of `size_per_group` (0 with one group)."""
    return index // size_per_group if groups > 1 else jnp.zeros_like(index)


def _trailing_ones(n: int):
    """[E] -> [E, 1 x n]: a per-entry array against a pair shape [E, ...]."""
    return lambda a: jnp.reshape(a, (-1,) + (1,) * n)


def _lhs_entries(lhs, rhs, g, index_dtype) -> _Pairs:
    """Each lhs entry (n, c, x) times the rhs block rhs[o in its group, c mod I, *K]:
    P = [El, O/T, *K] with T = max(G, B) groups."""
    vl, (n, c, *xs), ok = _entries(lhs, g["lspec"], index_dtype)
    T = max(g["G"], g["B"])
    I, Ot, nd = g["I"], g["O"] // T, len(xs)
    t = _group(c, I, g["G"]) if g["G"] > 1 else _group(n, g["N_out"], g["B"])     # [El]
    rhs_c = jnp.transpose(rhs, g["rspec"])                                       # [O, I, *K]
    K = tuple(rhs_c.shape[2:])
    rhs_t = jnp.moveaxis(jnp.reshape(rhs_c, (T, Ot, I, *K)), 2, 1)               # [T, I, Ot, *K]
    block = rhs_t[t, c % I]                                                      # [El, Ot, *K]
    P = (vl.shape[0], Ot, *K)
    expand = _trailing_ones(1 + nd)
    o = expand(t) * Ot + _iota(P, 1, t.dtype)
    ks = [_iota(P, 2 + j, t.dtype) for j in range(nd)]
    return _Pairs(P, expand(vl) * block, expand(ok), expand(n % g["N_out"]), o,
                  [expand(x) for x in xs], ks, tuple(range(len(P))))


def _rhs_entries(lhs, rhs, g, index_dtype) -> _Pairs:
    """Each rhs entry (o, i, k) times the lhs block lhs[n in o's batch group, feature
    g·I + i, *S]: P = [Er, N', *S], ordered lhs-major as [N', *S, Er]."""
    vr, (o, i, *ks), ok = _entries(rhs, g["rspec"], index_dtype)
    I, G, B, Nb, nd = g["I"], g["G"], g["B"], g["N_out"], len(ks)
    c = _group(o, g["O"] // G, G) * I + i                                       # [Er]
    b = _group(o, g["O"] // B, B)
    lhs_c = jnp.transpose(lhs, g["lspec"])                                       # [N, C, *S]
    S = tuple(lhs_c.shape[2:])
    lhs_b = jnp.moveaxis(jnp.reshape(lhs_c, (B, Nb, lhs_c.shape[1], *S)), 2, 1)  # [B, C, N', *S]
    block = lhs_b[b, c]                                                          # [Er, N', *S]
    P = (vr.shape[0], Nb, *S)
    expand = _trailing_ones(1 + nd)
    xs = [_iota(P, 2 + j, o.dtype) for j in range(nd)]
    return _Pairs(P, block * expand(vr), expand(ok), _iota(P, 1, o.dtype), expand(o), xs,
                  [expand(k) for k in ks], (*range(1, len(P)), 0))


def _as_entries(x):
    """A dense array as a BCOO storing every element (n_batch = n_dense = 0)."""
    grid = np.indices(x.shape, dtype=np.int32).reshape(x.ndim, -1).T             # [size, ndim]
    return BCOO((jnp.reshape(x, (-1,)), jnp.asarray(grid)), shape=x.shape)


def bcoo_conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation=None,
                              rhs_dilation=None, dimension_numbers=None,
                              feature_group_count=1, batch_group_count=1, precision=None,
                              preferred_element_type=None) -> BCOO:
    """lax.conv_general_dilated(lhs, rhs, ...) as a BCOO, for lhs and rhs each a BCOO or a
    dense array (the same arguments and checks as lax.conv_general_dilated).

    The result stores, unsummed, one entry per product that can land in the output (see
    the module doc): nse = nse(lhs)·nse(rhs) when both are sparse; a sparse operand's nse
    times the dense operand's block for one channel (rhs: [O/groups, *K], lhs: [N', *S])
    when one is dense; pairs landing outside are padding. `.sum_duplicates()` compacts it.
    In jax's case (batch and feature dims leading, both of size 1 in the output) it is
    laid out as jax's, n_batch=2, entries in jax's order; otherwise n_batch = n_dense = 0.

    Differences from jax: jax supports only one spatial dim, size-1 batch and feature dims,
    unit strides and dilations and no groups (NotImplementedError otherwise); fnad supports
    all of lax.conv_general_dilated's arguments. jax stores every pair with a dense operand
    too (nse = size · nse); fnad pairs an entry only with the channels it meets. Entries
    landing past the end keep their product in jax, are 0 in fnad. `precision` is accepted
    and ignored (the products are elementwise).
    """
    for which, x in (("lhs", lhs), ("rhs", rhs)):
        if isinstance(x, JAXSparse) and not isinstance(x, BCOO):
            raise TypeError(f"{_NAME}: {which} must be a BCOO or a dense array, got "
                            f"{type(x).__name__} (convert it with .todense() or to BCOO)")
    lhs = lhs if isinstance(lhs, BCOO) else jnp.asarray(lhs)
    rhs = rhs if isinstance(rhs, BCOO) else jnp.asarray(rhs)
    params, out_aval = _conv_params(lhs, rhs, dict(
        window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
        feature_group_count=feature_group_count, batch_group_count=batch_group_count,
        precision=precision, preferred_element_type=preferred_element_type))
    lspec, rspec, ospec = params["dimension_numbers"]
    out_shape, dtype = tuple(out_aval.shape), out_aval.dtype
    B = params["batch_group_count"]
    g = dict(lspec=lspec, rspec=rspec, I=rhs.shape[rspec[1]], O=rhs.shape[rspec[0]],
             G=params["feature_group_count"], B=B, N_out=lhs.shape[lspec[0]] // B)
    index_dtype = (lhs.indices.dtype if isinstance(lhs, BCOO)
                   else rhs.indices.dtype if isinstance(rhs, BCOO) else np.dtype(np.int32))
    lhs, rhs = lhs.astype(dtype), rhs.astype(dtype)             # (BCOO.astype: its data)
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        pairs = _both_sparse(lhs, rhs, g, index_dtype)
    elif isinstance(lhs, BCOO):
        pairs = _lhs_entries(lhs, rhs, g, index_dtype)
    elif isinstance(rhs, BCOO):
        pairs = _rhs_entries(lhs, rhs, g, index_dtype)
    else:                                     # both dense: the fewer products
        T = max(g["G"], g["B"])
        K = math.prod(rhs.shape[d] for d in rspec[2:])
        S = math.prod(lhs.shape[d] for d in lspec[2:])
        by_lhs, by_rhs = lhs.size * (g["O"] // T) * K, rhs.size * g["N_out"] * S
        pairs = (_lhs_entries(_as_entries(lhs), rhs, g, index_dtype) if by_lhs <= by_rhs
                 else _rhs_entries(lhs, _as_entries(rhs), g, index_dtype))
    return _store(pairs, params, out_shape, ospec, index_dtype)


def _store(pairs: _Pairs, params, out_shape, ospec, index_dtype) -> BCOO:
    """The BCOO of the pairs: output coordinates, padding where a product lands outside."""
    ok, out_cols = pairs.ok, [pairs.n_out, pairs.o]
    for j, (s, (lo, _), ld, rd) in enumerate(zip(
            params["window_strides"], params["padding"], params["lhs_dilation"],
            params["rhs_dilation"])):
        p = pairs.xs[j] * ld + lo - pairs.ks[j] * rd                              # y·stride
        ok = ok & (p >= 0) & (p % s == 0) & (p // s < out_shape[ospec[2 + j]])
        out_cols.append(p // s)

    def flat(a):                              # [*P] in lhs-major order -> [nse]
        a = jnp.transpose(jnp.broadcast_to(a, pairs.shape), pairs.perm)
        return jnp.reshape(a, (-1,))
    ok = jnp.broadcast_to(ok, pairs.shape)
    cols = [None] * len(out_shape)
    for d, col in zip(ospec, out_cols):       # padding: the dim's size
        cols[d] = flat(jnp.where(ok, col, out_shape[d]).astype(index_dtype))
    data = flat(jnp.where(ok, pairs.value, 0))                                   # [nse]
    nse = data.shape[0]
    if tuple(ospec[:2]) == (0, 1) and out_shape[:2] == (1, 1):                   # jax's layout
        indices = jnp.stack(cols[2:], axis=-1)                                   # [nse, nsp]
        return BCOO((jnp.reshape(data, (1, 1, nse)),
                     jnp.reshape(indices, (1, 1, nse, len(cols) - 2))), shape=out_shape)
    return BCOO((data, jnp.stack(cols, axis=-1)), shape=out_shape)             # [nse, ndim]
