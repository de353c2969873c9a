"""Eager implementations of the cuda backend: `impl_rules` on device buffers.

On the device:
  elementwise   every primitive scalar_ops.py has an emitter for, on bool, (u)int8..64,
                float32 and float64 (operands of equal shape, or rank-0 ones that
                broadcast): one generated kernel per (primitive, dtypes, which operands
                are scalars, params), cached; `stop_gradient` is the buffer itself
  reductions    reduce_sum/max/min/prod/and/or over any axes: the reduced axes moved last
                (a strided copy when they are not), then one thread per output element
  dot_general   operands permuted to [batch, M, K] and [batch, K, N] (strided copies where
                needed) and multiplied: cuBLAS through CuPy where CuPy is installed (on the
                same memory, via __cuda_array_interface__), else the tiled matmul kernel;
                float32, float64 and integers (float16 computes in float32)
  shape ops     reshape and squeeze (views); transpose, broadcast_in_dim, slice, rev,
                concatenate, pad, dynamic_slice and dynamic_update_slice (strided-copy
                kernels, on any device dtype; the dynamic ones read their start indices back
                to the host, one scalar each); iota (its own kernel)
Through the host (copied to NumPy, the reference impl, copied back), named so nobody mistakes
them for GPU code: every other primitive (cbrt, erf_inv, shifts, population_count, complex
ops, argmax/argmin, reduce_xor, cumulative ops, windowed reductions, gather/scatter,
sort/top_k, cholesky, triangular_solve, lu, fft), and the arithmetic of float16 (except
dot_general), bfloat16 and complex values. `HOST` is that set. The higher-order primitives
(cond, scan, while, custom_jvp/vjp, checkpoint) have no impl: their eager rules bind the
primitives of their bodies, which then run here.

Floats agree with the numpy backend to a few ulp, not bit for bit: libdevice's math
functions, FMA contraction by NVVM, and a sequential (per thread) summation order.
"""
from __future__ import annotations

import math

import numpy as np

from fnad.backends.cuda import impl_rules
from fnad.backends.cuda import kernels as kn
from fnad.backends.cuda import runtime as rt
from fnad.backends.cuda.scalar_ops import RED_KINDS, SUPPORTED, emit_rules, fusable, kind
from fnad.backends.numba_cpu import plan as pl
from fnad.backends.numpy_ref import impl_rules as ref_rules
from fnad.core import ShapedArray, abstract_eval_rules
from fnad.ir import JaxprEqn, Var
from fnad.primitives import linalg as la
from fnad.primitives import logic as lg
from fnad.primitives import shape_ops as so

HOST: set = set()        # the primitives that run through the host (for docs and tests)


# ---- through the host ----------------------------------------------------------------------
def through_host(prim):
    """prim's NumPy reference impl on host copies of the operands; results back on device."""
    ref = ref_rules[prim]

    def impl(*bufs, **params):
        out = ref(*[rt.to_host(b) for b in bufs], **params)
        if prim.multiple_results:
            return [rt.to_device(o) for o in out]
        return rt.to_device(out)
    impl.__name__ = f"{prim.name}_through_host"
    return impl


def _on_device(bufs) -> bool:
    return all(rt.is_device(b) and b.dtype in SUPPORTED for b in bufs)


# ---- elementwise: one kernel per structure ---------------------------------------------------
def _one_eqn_group(eqn, domain, in_dmaps, out_dmap, inner=frozenset()) -> pl.Group:
    """A fusion group holding just `eqn` (what plan.py would build for it alone)."""
    g = pl.Group(0, domain)
    g.members = [0]
    g.operands[0] = [("in", v, dm) for v, dm in zip(eqn.invars, in_dmaps)]
    g.inputs = list(zip(eqn.invars, in_dmaps))
    g.dmaps[eqn.outvars[0]] = out_dmap
    g.outputs = [eqn.outvars[0]]
    g.inner = inner
    return g


def elementwise(prim):
    """The device impl of an elementwise primitive (through the host where no kernel can)."""
    host = through_host(prim)
    kernels: dict = {}                  # (dtypes, scalar operands, params) -> kernel | None

    def build(bufs, params):
        # a placeholder domain (2,): sizes are kernel arguments, one kernel serves every n
        avals = [ShapedArray(() if not b.shape else (2,), b.dtype) for b in bufs]
        out = abstract_eval_rules[prim](*avals, **params)
        eqn = JaxprEqn(prim, [Var(a) for a in avals], dict(params), [Var(out)])
        if not fusable(eqn):
            return None
        dmaps = [(0,) if a.shape else () for a in avals]
        g = _one_eqn_group(eqn, (2,), dmaps, (0,) if out.shape else ())
        return kn.group_kernel(g, [eqn], f"k_{prim.name}"), out.dtype

    def impl(*bufs, **params):
        bufs = [rt.to_device(b) for b in bufs]
        if not _on_device(bufs):
            return host(*bufs, **params)
        key = (tuple((b.dtype, not b.shape) for b in bufs), tuple(params.items()))
        try:
            built = kernels.get(key, False)
        except TypeError:                               # an unhashable param
            key, built = None, False
        if built is False:
            built = build(bufs, params)
            if key is not None:
                kernels[key] = built
        if built is None:
            return host(*bufs, **params)
        kernel, out_dtype = built
        shape = next((b.shape for b in bufs if b.shape), ())
        out = rt.empty(shape, out_dtype)
        kernel(bufs, [out], sizes=(math.prod(shape),))
        return out
    impl.__name__ = f"{prim.name}_cuda"
    return impl


# ---- reductions ------------------------------------------------------------------------------
def reduction(prim):
    host = through_host(prim)
    kernels: dict = {}                                   # dtype -> kernel

    def build(dt):
        x = Var(ShapedArray((2, 2), dt))
        out = Var(ShapedArray((2,), dt))
        eqn = JaxprEqn(prim, [x], {"axes": (1,)}, [out])
        g = _one_eqn_group(eqn, (2, 2), [(0, 1)], (0,), inner=frozenset({1}))
        return kn.group_kernel(g, [eqn], f"k_{prim.name}")

    def impl(x, *, axes):
        x = rt.to_device(x)
        if not _on_device([x]) or kind(x.dtype) not in RED_KINDS[prim]:
            return host(x, axes=axes)
        shape = tuple(x.shape)
        axes = tuple(sorted(a % len(shape) for a in axes)) if shape else ()
        keep = tuple(d for d in range(len(shape)) if d not in axes)
        if axes and keep and max(keep) > min(axes):      # reduced axes last: [keep, axes]
            x = transpose(x, permutation=keep + axes)
        out = rt.empty(tuple(shape[d] for d in keep), x.dtype)
        kernel = kernels.get(x.dtype)
        if kernel is None:
            kernel = kernels[x.dtype] = build(x.dtype)
        outer = math.prod(shape[d] for d in keep)
        kernel([x], [out], sizes=(outer, math.prod(shape[d] for d in axes)))
        return out
    impl.__name__ = f"{prim.name}_cuda"
    return impl


# ---- shape ops: views and strided copies --------------------------------------------------------
def _device_or_host(prim, fn, n_arrays: int | None = None):
    """fn on device buffers (any dtype: these only move elements); through the host when an
    array operand is a host value. The first `n_arrays` operands are arrays (all if None);
    the rest (start indices) may be anywhere."""
    host = through_host(prim)

    def impl(*bufs, **params):
        k = len(bufs) if n_arrays is None else n_arrays
        bufs = [rt.to_device(b) for b in bufs[:k]] + list(bufs[k:])
        if not all(rt.is_device(b) for b in bufs[:k]):
            return host(*bufs, **params)
        return fn(*bufs, **params)
    impl.__name__ = f"{prim.name}_cuda"
    return impl


def reshape(x, *, new_sizes):
    new_sizes = tuple(new_sizes)
    if tuple(x.shape) == new_sizes:
        return x
    if not math.prod(new_sizes):
        return rt.empty(new_sizes, x.dtype)            # nothing to view
    return x.reshape(new_sizes)                        # a view: buffers are C-contiguous


def squeeze(x, *, dimensions):
    return reshape(x, new_sizes=tuple(n for d, n in enumerate(x.shape) if d not in dimensions))


def transpose(x, *, permutation):
    if tuple(permutation) == tuple(range(len(x.shape))):
        return x
    cs = kn.c_strides(x.shape)
    return kn.strided_copy(x, tuple(x.shape[p] for p in permutation),
                           tuple(cs[p] for p in permutation))


def broadcast_in_dim(x, *, shape, broadcast_dimensions):
    cs = kn.c_strides(x.shape)
    strides = [0] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] == shape[d]:
            strides[d] = cs[i]                           # a size-1 dim broadcasts: stride 0
    return kn.strided_copy(x, tuple(shape), tuple(strides))


def slice_(x, *, start_indices, limit_indices, strides):
    strides = (1,) * len(start_indices) if strides is None else strides
    cs = kn.c_strides(x.shape)
    shape = tuple(max(0, -(-(hi - lo) // st))
                  for lo, hi, st in zip(start_indices, limit_indices, strides))
    offset = sum(lo * c for lo, c in zip(start_indices, cs))
    return kn.strided_copy(x, shape, tuple(c * st for c, st in zip(cs, strides)), offset)


def rev(x, *, dimensions):
    if not dimensions:
        return x
    cs = kn.c_strides(x.shape)
    strides = tuple(-c if d in dimensions else c for d, c in enumerate(cs))
    offset = sum((x.shape[d] - 1) * cs[d] for d in dimensions if x.shape[d])
    return kn.strided_copy(x, tuple(x.shape), strides, offset)


def concatenate(*xs, dimension):
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    out = rt.empty(tuple(shape), xs[0].dtype)
    cs = kn.c_strides(shape)
    start = 0
    for x in xs:                                          # each operand into its block
        kn.copy_into(out, x, tuple(x.shape), kn.c_strides(x.shape), 0, cs, start * cs[dimension])
        start += x.shape[dimension]
    return out


def pad(x, v, *, padding_config):
    """v everywhere, then x's elements at lo + i * (interior + 1) that land inside (negative
    lo/hi cut them off)."""
    n_out, shape, x_off, o_off, o_strides = [], [], 0, 0, []
    cx = kn.c_strides(x.shape)
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        n_out.append(lo + hi + (n + (n - 1) * interior if n else 0))
    co = kn.c_strides(n_out)
    for d, (n, (lo, _, interior)) in enumerate(zip(x.shape, padding_config)):
        step = interior + 1
        i0 = max(0, -(lo // step) if lo < 0 else 0)       # first i with lo + i*step >= 0
        i1 = min(n - 1, (n_out[d] - 1 - lo) // step)      # last with lo + i*step < n_out
        shape.append(max(0, i1 - i0 + 1))
        x_off += i0 * cx[d]
        o_off += (lo + i0 * step) * co[d]
        o_strides.append(step * co[d])
    out = kn.strided_copy(v, tuple(n_out), (0,) * len(n_out))
    if all(shape):
        kn.copy_into(out, x, tuple(shape), cx, x_off, tuple(o_strides), o_off)
    return out


def _starts(shape, idx, sizes) -> list:
    """Start indices (read back from the device, one scalar each), clamped as XLA does."""
    return [min(max(int(rt.to_host(i)), 0), n - s) for i, n, s in zip(idx, shape, sizes)]


def dynamic_slice(x, *idx, slice_sizes):
    cs = kn.c_strides(x.shape)
    starts = _starts(x.shape, idx, slice_sizes)
    return kn.strided_copy(x, tuple(slice_sizes), cs, sum(a * c for a, c in zip(starts, cs)))


def dynamic_update_slice(x, update, *idx):
    cs = kn.c_strides(x.shape)
    out = kn.strided_copy(x, tuple(x.shape), cs)            # never write into the operand
    starts = _starts(x.shape, idx, update.shape)
    kn.copy_into(out, update, tuple(update.shape), kn.c_strides(update.shape), 0,
                 cs, sum(a * c for a, c in zip(starts, cs)))
    return out


def iota(*, dtype, shape, dimension):
    if np.dtype(dtype) not in SUPPORTED:
        return _iota_host(dtype=dtype, shape=shape, dimension=dimension)
    return kn.iota(dtype, tuple(shape), dimension)


_iota_host = through_host(so.iota_p)


# ---- dot_general -----------------------------------------------------------------------------
DOT_DTYPES = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8,
                                             np.uint16, np.uint32, np.uint64, np.float32,
                                             np.float64))

_DOT_OPERANDS = SUPPORTED | {np.dtype(np.float16)}


def _convert(x, dt):
    if x.dtype == dt:
        return x
    return impl_rules[lg.convert_element_type_p](x, new_dtype=np.dtype(dt), weak_type=False)


def dot_general(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    lhs, rhs = rt.to_device(lhs), rt.to_device(rhs)
    out_dtype = la.dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = np.dtype(np.float32) if out_dtype == np.float16 else out_dtype
    if not (rt.is_device(lhs) and rt.is_device(rhs)) or cdt not in DOT_DTYPES \
            or lhs.dtype not in _DOT_OPERANDS or rhs.dtype not in _DOT_OPERANDS:
        return _dot_host(lhs, rhs, dimension_numbers=dimension_numbers, precision=precision,
                         preferred_element_type=preferred_element_type)
    (lc, rc), (lb, rb) = dimension_numbers
    nl, nr = len(lhs.shape), len(rhs.shape)
    lf = [i for i in range(nl) if i not in lc and i not in lb]
    rf = [i for i in range(nr) if i not in rc and i not in rb]
    batch = tuple(lhs.shape[i] for i in lb)
    l_free = tuple(lhs.shape[i] for i in lf)
    r_free = tuple(rhs.shape[i] for i in rf)
    B, K = math.prod(batch), math.prod(lhs.shape[i] for i in lc)
    M, N = math.prod(l_free), math.prod(r_free)
    a = transpose(_convert(lhs, cdt), permutation=(*lb, *lf, *lc))   # [batch.., M.., K..]
    b = transpose(_convert(rhs, cdt), permutation=(*rb, *rc, *rf))   # [batch.., K.., N..]
    if B * M * N * K == 0:                                          # empty, or K = 0
        out = _zeros((B, M, N), cdt)
    elif rt.cupy is not None:
        out = _gemm_cupy(a.reshape((B, M, K)), b.reshape((B, K, N)))
    else:
        out = rt.empty((B, M, N), cdt)
        kn.matmul(a.reshape((B, M, K)), b.reshape((B, K, N)), out)   # [B,M,K] @ [B,K,N]
    return _convert(reshape(out, new_sizes=batch + l_free + r_free), out_dtype)


_dot_host = through_host(la.dot_general_p)


def _gemm_cupy(a, b):
    """a @ b with cuBLAS on the same device memory (no copy in, none out)."""
    from numba import cuda
    cp = rt.cupy
    out = cp.matmul(cp.asarray(a), cp.asarray(b))                    # [B, M, N]
    return cuda.as_cuda_array(cp.ascontiguousarray(out))


def _zeros(shape, dt):
    return rt.to_device(np.zeros(shape, dt))


# ---- the table ---------------------------------------------------------------------------------
_DEVICE_SHAPE_OPS = {so.reshape_p: (reshape, None), so.squeeze_p: (squeeze, None),
                     so.transpose_p: (transpose, None),
                     so.broadcast_in_dim_p: (broadcast_in_dim, None), so.slice_p: (slice_, None),
                     so.rev_p: (rev, None), so.concatenate_p: (concatenate, None),
                     so.pad_p: (pad, None), so.dynamic_slice_p: (dynamic_slice, 1),
                     so.dynamic_update_slice_p: (dynamic_update_slice, 2)}

for _p in ref_rules:
    impl_rules[_p] = through_host(_p)          # first everything through the host ...
    HOST.add(_p)
for _p in emit_rules:                          # ... then what runs on the device
    if _p in ref_rules:
        impl_rules[_p] = elementwise(_p)
        HOST.discard(_p)
for _p in pl.REDUCTIONS:
    impl_rules[_p] = reduction(_p)
    HOST.discard(_p)
for _p, (_fn, _n) in _DEVICE_SHAPE_OPS.items():
    impl_rules[_p] = _device_or_host(_p, _fn, _n)
    HOST.discard(_p)
impl_rules[so.iota_p] = iota
HOST.discard(so.iota_p)
impl_rules[la.dot_general_p] = dot_general
HOST.discard(la.dot_general_p)
impl_rules[lg.stop_gradient_p] = lambda x: x    # buffers are immutable: the value itself
