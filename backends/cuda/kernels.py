"""CUDA kernel source for the cuda backend: fusion groups, strided copies, tiled matmul.

Owns:
  - `group_kernel(g, eqns)`: the kernel of one fusion group of the numba backend's planner
    (backends/numba_cpu/plan.py), with the scalar code of scalar_ops.py. The CPU kernel is a
    loop nest over the group's domain (backends/numba_cpu/kernels.py); here its *outer*
    loops become the thread grid, one thread per outer index, and each thread runs the
    group's stages (reductions over the trailing `inner` dims) as loops of its own::

        def kernel(nt, n0, n1, a0, p0, b0):          # softmax over rows of [M, N]
            tid = cuda.grid(1)
            if tid >= nt:
                return
            i0 = tid                                   # the row
            r1 = -inf                                  # stage 0: m = max(x)
            for i1 in range(n1): r1 = rmaximum(r1, a0[i0 * n1 + i1])
            r2 = 0                                     # stage 1: e = exp(x - m), s = sum(e)
            for i1 in range(n1): ... b0[tid * n1 + i1] = e; r2 = radd(r2, e)
            for i1 in range(n1): p0[i0 * n1 + i1] = b0[tid * n1 + i1] / r2    # stage 2

    Sizes are arguments (one kernel per structure, not per shape); inputs and outputs are
    flat C-contiguous device arrays; values a later stage reads again go through a scratch
    array of nt * (inner size) elements (`b*`) that the caller allocates (`GroupKernel`).
  - `copy_kernel(rank)`: out[ooff + sum_k i_k * ostride_k] = x[off + sum_k i_k * stride_k]
    over an index space (n_0, ..): transpose, broadcast_in_dim, slice, rev, concatenate,
    pad and the dynamic slices are strides and offsets; `iota` is its own small kernel.
  - `matmul_kernel(dtype, tile)`: C[b] = A[b] @ B[b] for flat [B, M, K] and [B, K, N], with
    tile x tile blocks of A and B staged in shared memory.
"""
from __future__ import annotations

import math

import numpy as np

from fnad.backends.cuda import runtime as rt
from fnad.backends.cuda.scalar_ops import emit_rules
from fnad.backends.numba_cpu import plan as pl
from fnad.backends.numba_cpu.kernels import Stages, _Emitter, _Layout, emit_body
from fnad.backends.numba_cpu.scalar_ops import const, np_name


class GroupKernel:
    """A compiled group kernel and what its caller must pass: `sizes` (the loop sizes at the
    group's shapes), the outer/inner loop dims, and the dtypes of its scratch buffers."""

    __slots__ = ("kernel", "source", "sizes", "outer", "inner", "buffer_dtypes")

    def __init__(self, kernel, source, sizes, outer, inner, buffer_dtypes):
        self.kernel, self.source, self.sizes = kernel, source, sizes
        self.outer, self.inner, self.buffer_dtypes = outer, inner, buffer_dtypes

    def __call__(self, inputs: list, outputs: list, sizes=None) -> None:
        """Run on device arrays: `inputs` in the group's order, `outputs` preallocated (any
        shape, C-contiguous); `sizes` overrides the loop sizes (eager kernels)."""
        sizes = self.sizes if sizes is None else sizes
        nt = math.prod(sizes[m] for m in self.outer)
        if nt == 0:
            return
        inner = math.prod(sizes[m] for m in self.inner)
        scratch = [rt.empty((nt * inner,), dt) for dt in self.buffer_dtypes]
        rt.launch(self.kernel, nt, nt, *sizes, *[rt.flat(x) for x in inputs],
                  *[rt.flat(o) for o in outputs], *scratch)


def group_kernel(g: pl.Group, eqns: list, name: str = "kernel") -> GroupKernel:
    """The kernel of group `g` (members are indices into `eqns`; outputs are g.outputs)."""
    src, sizes, outer, inner, buffer_dtypes = group_kernel_source(g, eqns, name)
    return GroupKernel(rt.load_kernel(src, name), src, sizes, outer, inner, buffer_dtypes)


def group_kernel_source(g: pl.Group, eqns: list, name: str = "kernel"):
    """(source, loop sizes, outer loop dims, inner loop dims, scratch buffer dtypes)."""
    E = _Emitter()
    members = [eqns[i] for i in g.members]
    outs = {v: k for k, v in enumerate(g.outputs)}
    dmaps = [dm for _, dm in g.inputs] + [g.dmaps[v] for e in members for v in e.outvars]
    L = _Layout(g.domain, g.inner, dmaps)
    st = Stages(g, members, L, outs)             # the same stages as on the CPU
    buffers = st.buffers

    # -- prologue: the thread's outer index --
    args = ["nt"] + [f"n{m}" for m in range(len(L.runs))]
    args += [f"a{k}" for k in range(len(g.inputs))]
    args += [f"p{k}" for k in range(len(outs))]
    args += list(buffers.values())
    E.line("tid = cuda.grid(1)")
    E.line("if tid >= nt:")
    E.line("    return")
    if L.outer:
        E.line("t = tid")
        for m in reversed(L.outer[1:]):
            E.line(f"i{m} = t % n{m}")
            E.line(f"t = t // n{m}")
        E.line(f"i{L.outer[0]} = t")
    in_name, in_mask = {}, {}
    for k, (v, dm) in enumerate(g.inputs):
        in_mask[k] = L.mask(dm)
        in_name[(v, dm)] = k
        if not in_mask[k]:
            E.line(f"x{k} = a{k}[0]")                  # one element, read once
    inner_n = " * ".join(f"n{m}" for m in L.inner) or "1"
    buf_index = f"tid * ({inner_n}) + {L.inner_index()}"

    emit_body(E, g, members, L, st, outs, in_name, in_mask, emit_rules,
              array=lambda k: f"a{k}", buf_index=buf_index)

    src = "\n".join([f"def {name}({', '.join(args)}):"] + E.lines) + "\n"
    if E.imports:                                      # a CPU-only rule slipped through
        raise AssertionError(f"cuda kernel uses CPU math functions {sorted(E.imports)}")
    return (src, tuple(L.sizes), tuple(L.outer), tuple(L.inner),
            tuple(v.aval.dtype for v in buffers))


# ---- strided copies ----------------------------------------------------------------------------
def copy_kernel(rank: int):
    """out[ooff + i . ostrides] = x[off + i . strides] for every index i of shape (n_0, ..)."""
    ns = [f"n{k}" for k in range(rank)]
    ss = [f"s{k}" for k in range(rank)]
    os_ = [f"o{k}" for k in range(rank)]
    lines = [f"def copy{rank}(out, x, nt, ooff, off{''.join(', ' + a for a in ns + ss + os_)}):",
             "    t = cuda.grid(1)",
             "    if t >= nt:",
             "        return",
             "    j = off",
             "    w = ooff",
             "    u = t"]
    for k in reversed(range(rank)):
        lines += [f"    i = u % n{k}", f"    j += i * s{k}", f"    w += i * o{k}",
                  f"    u = u // n{k}"]
    lines.append("    out[w] = x[j]")
    return rt.load_kernel("\n".join(lines) + "\n", f"copy{rank}")


def copy_into(out, x, shape: tuple, strides: tuple, offset: int, out_strides: tuple,
              out_offset: int = 0) -> None:
    """out.flat[out_offset + i . out_strides] = x.flat[offset + i . strides] for every index i
    of `shape` (strides in elements; 0 broadcasts, negative reverses)."""
    n = math.prod(shape)
    if n:
        rt.launch(copy_kernel(len(shape)), n, rt.flat(out), rt.flat(x), n, out_offset, offset,
                  *shape, *strides, *out_strides)


def strided_copy(x, shape: tuple, strides: tuple, offset: int = 0):
    """A new C-contiguous device array of `shape`: element i is x.flat[offset + i . strides]."""
    out = rt.empty(shape, x.dtype)
    copy_into(out, x, shape, strides, offset, c_strides(shape))
    return out


def c_strides(shape) -> tuple:
    """Row-major strides in elements."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


_IOTA = """\
def iota(out, nt, n, inner):
    t = cuda.grid(1)
    if t < nt:
        out[t] = {cast}((t // inner) % n)
"""


def iota(dtype, shape: tuple, dimension: int):
    """out[..., i, ...] = i along `dimension`."""
    dt = np.dtype(dtype)
    out = rt.empty(shape, dt)
    nt = math.prod(shape)
    if nt:
        kernel = rt.load_kernel(_IOTA.format(cast=np_name(dt)), "iota")
        rt.launch(kernel, nt, rt.flat(out), nt, shape[dimension],
                  math.prod(shape[dimension + 1:]))
    return out


# ---- matmul ------------------------------------------------------------------------------------
TILE = 4 if rt.SIMULATOR else 16      # the simulator runs a Python thread per CUDA thread
_MATMUL = """\
def matmul(a, b, c, nb, m, n, k):
    sa = cuda.shared.array(({T}, {T}), {dt})
    sb = cuda.shared.array(({T}, {T}), {dt})
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col = cuda.blockIdx.x * {T} + tx
    row = cuda.blockIdx.y * {T} + ty
    for bz in range(cuda.blockIdx.z, nb, cuda.gridDim.z):
        acc = {zero}
        for k0 in range(0, k, {T}):
            ka = k0 + tx
            kb = k0 + ty
            sa[ty, tx] = a[(bz * m + row) * k + ka] if row < m and ka < k else {zero}
            sb[ty, tx] = b[(bz * k + kb) * n + col] if kb < k and col < n else {zero}
            cuda.syncthreads()
            for kk in range({T}):
                acc = {cast}(acc + sa[ty, kk] * sb[kk, tx])
            cuda.syncthreads()
        if row < m and col < n:
            c[(bz * m + row) * n + col] = acc
"""


def matmul_kernel(dtype):
    dt = np.dtype(dtype)
    src = _MATMUL.format(T=TILE, dt=np_name(dt), zero=const(0, dt), cast=np_name(dt))
    return rt.load_kernel(src, "matmul")


def matmul(a, b, out) -> None:
    """out[B, M, N] = a[B, M, K] @ b[B, K, N] (device arrays of one dtype; out preallocated)."""
    nb, m, k = a.shape
    n = b.shape[2]
    if nb * m * n == 0:
        return
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE, min(nb, 65535))
    matmul_kernel(a.dtype)[grid, (TILE, TILE)](rt.flat(a), rt.flat(b), rt.flat(out),
                                               nb, m, n, k)
