"""Helpers that the generated modules of the numba backend call inside their kernels.

Owns: `scalar_of` (a rank-0 buffer, 0-d array or NumPy scalar, as a numba scalar), integer
division and remainder with lax's rounding (toward zero; x / 0 gives 0, as the NumPy
reference), `fmaximum`/`fminimum` (LLVM's NaN-propagating maximum/minimum: np.maximum's
semantics, and a max-reduction loop over them vectorizes, where `v if v > m else m` with a
NaN check does not: 1000x1000 f32 row max 59 us against 520 us), the reductions'
accumulation steps `radd`/`rmaximum`/`rminimum` (the only instructions of a kernel with
fast-math flags), `flat` (an array's flat view, cheap to compile: a kernel's rank-0
output), `empty` (allocation) and `fetch_add` (the chunk counter of a threaded kernel; the
threads themselves, and what the drivers pass to kernels, are threads.py's, which does not
import numba). The code generator writes a hash of this file into every generated module
(numba's on-disk cache does not see changes in helper modules, so a change here must change
the generated source: codegen._stamp). It also loads compiled code from numba's disk cache
without starting the rest of numba (`load_cached`) and prepares numba's compiles
(`before_compiling`). Imports only numpy, numba and llvmlite.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload


def before_compiling() -> None:
    """Import numba.np.arraymath, which numba's CPU target imports before it compiles any
    function (its `refresh`), without the `scipy.linalg` package it imports on the way.
    Called where fnad is about to compile (Compiled._first when a kernel is not in the disk
    cache, precompile.py): a process that only loads compiled code (load_cached) does not
    import arraymath (15-20 ms here). (It imports numba.np.arrayobj, 25-30 ms: the cached
    environments of kernels that use numba's array helpers name that module.)

    arraymath checks at import that BLAS is there by importing scipy.linalg.cython_blas,
    and Python imports a package before its submodule: scipy.linalg's __init__ (its
    decompositions, scipy's array-API layer) took 0.11-0.20 s of the 0.47-0.55 s that
    importing this module and starting numba's CPU target took on the 2-core machine, in
    every process (a warm first call, each compile child); 0.23-0.32 s without it.
    fnad's kernels call no BLAS from numba. Here the cython_blas extension is loaded from
    its file alone (3 ms) and stands in sys.modules while arraymath imports; the entry is
    then removed, so that a later `import scipy.linalg.cython_blas` (numba's np.dot,
    the user's code) imports the package as usual and gets the same extension module.
    Where scipy.linalg (or arraymath) is already imported, or the file is not found, this
    does nothing special. Should numba compile without it (a path that does not call it),
    it imports scipy.linalg: slower, the same code."""
    name = "scipy.linalg.cython_blas"
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        scipy = importlib.util.find_spec("scipy")
        where = [os.path.join(d, "linalg") for d in scipy.submodule_search_locations]
        spec = importlib.machinery.PathFinder.find_spec(name, where)
        if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            raise ImportError(f"{name} is not an extension module here")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    except (ImportError, AttributeError, TypeError, OSError):
        sys.modules.pop(name, None)          # arraymath imports scipy.linalg as usual
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        sys.modules.pop(name, None)


_njit = numba.njit(error_model="numpy", cache=True, no_cfunc_wrapper=True)   # kernels.py


def load_cached(dispatcher, argtypes: tuple) -> bool:
    """Load `dispatcher`'s machine code for `argtypes` (numba types) from numba's disk
    cache, as `dispatcher.compile(argtypes)` does on a cache hit, without the `refresh` of
    numba's CPU target that numba runs first: importing and registering all of numba's
    typing and lowering (110-150 ms here, once per process), which compiling needs and
    loading compiled code does not. Loaded code links only against numba's helper library
    (installed with the target context) and its runtime (NRT, initialized here). A compile
    later in the process refreshes as usual. True when the code is loaded (or already
    was); False where the cache has no entry for it or numba's internals are not the ones
    this reads (numba 0.6x's `Dispatcher._cache`): the caller's first call then loads or
    compiles it the usual way."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys
    argtypes = tuple(argtypes)
    try:
        if argtypes in dispatcher.overloads:
            return True
        with global_compiler_lock:
            if argtypes in dispatcher.overloads:
                return True
            ctx, cache = dispatcher.targetctx, dispatcher._cache
            rtsys.initialize(ctx)
            with cache._guard_against_spurious_io_errors():
                cres = cache._load_overload(argtypes, ctx)
            if cres is None or cres.objectmode:
                return False
            ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            dispatcher.add_overload(cres)
            dispatcher._cache_hits[argtypes] += 1
    except (AttributeError, TypeError):
        return False
    return True


def scalar_of(x):
    """The value of a rank-0 buffer: `x[()]` for a 0-d array, x itself for a scalar."""
    return x[()] if isinstance(x, np.ndarray) else x


@overload(scalar_of, inline="always")
def _scalar_of_overload(x):
    if isinstance(x, types.Array):
        return lambda x: x[()]
    return lambda x: x


@_njit
def idiv(a, b):
    """a / b for integers, rounded toward zero (lax.div); 0 where b == 0."""
    if b == 0:
        return a - a                                   # 0 of a's type
    if b == -1:
        return -a                                      # wraps at the minimum, no trap
    q = a // b
    if q * b != a and (a < 0) != (b < 0):              # floor -> toward zero
        q += 1
    return q


@_njit
def irem(a, b):
    """a - b * idiv(a, b): the remainder with the sign of a (np.fmod); 0 where b == 0."""
    if b == 0 or b == -1:
        return a - a
    return a - b * idiv(a, b)


@_njit
def udiv(a, b):
    """a / b for unsigned integers (lax.div); 0 where b == 0. idiv's comparisons with -1 would
    make numba compute uint64 in float64."""
    if b == 0:
        return a - a
    return a // b


@_njit
def urem(a, b):
    """a % b for unsigned integers (lax.rem); 0 where b == 0."""
    if b == 0:
        return a - a
    return a % b


def _binary_float_intrinsic(llvm_name: str, doc: str, flags: tuple = ()):
    @intrinsic
    def fn(typingctx, a, b):
        if a not in (types.float32, types.float64) or a != b:
            return None

        def codegen(context, builder, sig, args):
            t = args[0].type
            f = builder.module.declare_intrinsic(llvm_name, [t], ir.FunctionType(t, [t, t]))
            return builder.call(f, args, fastmath=flags)
        return a(a, b), codegen
    fn.__doc__ = doc
    return fn


def _binary_float_op(op: str, doc: str, flags: tuple):
    @intrinsic
    def fn(typingctx, a, b):
        if a not in (types.float32, types.float64) or a != b:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1], flags=flags)
        return a(a, b), codegen
    fn.__doc__ = doc
    return fn


fmaximum = _binary_float_intrinsic("llvm.maximum", "max(a, b); NaN if either is NaN.")
fminimum = _binary_float_intrinsic("llvm.minimum", "min(a, b); NaN if either is NaN.")

# The accumulation steps of float reductions. Kernels are compiled without fast-math flags
# (so that a fused a*b + c rounds twice, as NumPy does, and x / c is a division), but a
# reduction loop vectorizes only when its accumulator may be reassociated: these carry the
# flags on that one instruction (1000x1000 f32 row sums 44 us against 770 us without;
# a max with `nsz` 60 us against 125 us). NaN still propagates (no `nnan`).
radd = _binary_float_op("fadd", "a + b, reassociable (a sum's accumulation step).",
                        ("reassoc", "nsz"))
rmaximum = _binary_float_intrinsic("llvm.maximum", "fmaximum for a max-reduction's step.",
                                   ("reassoc", "nsz"))
rminimum = _binary_float_intrinsic("llvm.minimum", "fminimum for a min-reduction's step.",
                                   ("reassoc", "nsz"))


@intrinsic
def wide_vectors(typingctx):
    """Called first in a kernel: marks the kernel's LLVM function "prefer-vector-width"="512".
    LLVM tunes for 256-bit vectors on Intel's AVX-512 CPUs (its `prefer-256-bit` tuning, from
    Skylake-SP to Sapphire Rapids), so numba's loops there used half of each zmm register;
    with the mark they use all of it (an inlined exp_f32 loop over 16K f32 in cache 9.4 ->
    6.9 us on Sapphire Rapids). Where 512-bit vectors are not legal (AVX2) LLVM keeps the
    widest that is."""
    def codegen(context, builder, sig, args):
        # llvmlite's FunctionAttributes knows only LLVM's enum attributes; a string attribute
        # is written out as given (set.add skips its check of the name)
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def flat(typingctx, a):
    """A C-contiguous array as a 1-D view of its memory: `a.reshape(-1)` without numba's
    reshape, whose lowering (a call into its no-copy-reshape helper, shape and stride
    buffers) cost ~12 ms of compile time per array a kernel flattens: a third of a small
    kernel's (4 arrays: 190 against 145 ms per kernel). Kernels now get their other arrays
    flat from the driver (codegen._Driver.group) and use this for a rank-0 output only."""
    if not (isinstance(a, types.Array) and a.layout == "C"):
        return None
    flat_type = a.copy(ndim=1, layout="C")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import make_array, populate_array
        src = make_array(sig.args[0])(context, builder, value=args[0])
        out = make_array(flat_type)(context, builder)
        populate_array(out, data=src.data, shape=cgutils.pack_array(builder, [src.nitems]),
                       strides=cgutils.pack_array(builder, [src.itemsize]),
                       itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return impl_ret_borrowed(context, builder, flat_type, out._getvalue())
    return flat_type(a), codegen



@intrinsic
def empty(typingctx, size, dtype):
    """np.empty(size, dtype) for an int `size` (a kernel's flat outputs and row buffers) or
    np.empty((), dtype): the array allocated through numba's runtime (NRT, aligned) as
    np.empty's lowering allocates it, but in the kernel's own code. np.empty is implemented
    by functions of numba.np.arrayobj, whose environments a kernel's cached code then
    names: loading it imports that module (25-30 ms of a warm-cache first call here), and
    compiling it compiles them. Sizes come from the program's shapes, so numba's check for
    an overflowing size is left out."""
    if isinstance(dtype, types.NumberClass):
        dt = dtype.instance_type
    elif isinstance(dtype, types.DType):
        dt = dtype.dtype
    else:
        return None
    if isinstance(size, types.Integer):
        ndim = 1
    elif isinstance(size, types.BaseTuple) and len(size) == 0:
        ndim = 0
    else:
        return None
    array_type = types.Array(dt, ndim, "C")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import make_array, populate_array
        out = make_array(array_type)(context, builder)
        itemsize = context.get_constant(
            types.intp, context.get_abi_sizeof(context.get_data_type(dt)))
        if ndim:
            n = context.cast(builder, args[0], sig.args[0], types.intp)
            shape, strides, nbytes = [n], [itemsize], builder.mul(n, itemsize)
        else:
            shape, strides, nbytes = [], [], itemsize
        meminfo = context.nrt.meminfo_alloc_aligned(
            builder, size=nbytes, align=context.get_preferred_array_alignment(dt))
        data = context.nrt.meminfo_data(builder, meminfo)
        populate_array(out, data=builder.bitcast(data, out.data.type), shape=shape,
                       strides=strides, itemsize=itemsize, meminfo=meminfo)
        return out._getvalue()
    return array_type(size, dtype), codegen

# ---- threads -------------------------------------------------------------------------------
# A large kernel runs in chunks of its outermost loop that threads claim one at a time from
# a shared counter (`fetch_add`): the calling thread and the pool's workers all run the
# same nogil kernel until no chunk is left. Measured on the 2-core machine this was built
# on, numba's `prange` (OpenMP / workqueue) halves a 1M-element kernel when the machine is
# idle but takes 10-15 ms instead of 0.8 ms when other processes keep the cores busy: its
# fork-join waits for a descheduled thread's fixed share. Here the caller simply does the
# chunks a late worker did not claim, and a worker that comes after the caller is done
# skips the task (threads.py: `_Workers`, `run_threaded`).
@intrinsic
def fetch_add(typingctx, counter):
    """counter[0] += 1 atomically (an int64 array); returns the old value, as a uint64 (a
    chunk number, computed with the kernel's unsigned sizes)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", arr.data, ir.Constant(ir.IntType(64), 1), "seq_cst")
    return types.uint64(counter), codegen


