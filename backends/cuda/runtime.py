"""The cuda backend's runtime: device detection, device buffers, kernel loading and launch.

Owns: `check_available()` (the ImportError a machine without a CUDA GPU gets), `SIMULATOR`
(numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1, is on), buffers (`to_device`, `to_host`,
`empty`, `flat`, `is_device`), `load_kernel(source, name)` (generated source -> a
`numba.cuda.jit` kernel, once per distinct source), `launch(kernel, threads, *args)` (1-D
grids), the device functions generated kernels call (`idiv`, `irem`, `fmaximum`,
`fminimum`, `radd`, `rmaximum`, `rminimum`: the CPU backend's runtime helpers, as CUDA
device functions) and `cupy` (the module where CuPy imports and runs on the device, else None).

Buffers are numba device arrays (`DeviceNDArray`; `FakeCUDAArray` under the simulator),
always C-contiguous with the aval's shape. Values of dtypes a kernel never touches
(bfloat16, float0, ...) stay NumPy arrays in host memory; every impl accepts either.

Under the simulator each CUDA thread is a Python thread running the kernel's source, and
`math` in a kernel's namespace is NumPy's ufuncs (`_SimMath`): the same source then keeps
float32 in float32 and returns inf/NaN where Python's `math` would raise (log(0),
sqrt(-1)), as the GPU does.
"""
from __future__ import annotations

import hashlib
import importlib
import math
import types
import warnings

import numpy as np

_NEEDS = ("the 'cuda' backend needs an NVIDIA GPU with a CUDA driver and numba-cuda: "
          "pip install 'fnad[cuda]' (numba-cuda with CUDA 12's compiler, and cupy-cuda12x "
          "for cuBLAS GEMM; 'fnad[cuda13]' for CUDA 13's)")

try:
    import numba
    from numba import cuda
except ImportError as e:  # pragma: no cover - numba is a dependency of fnad
    raise ImportError(f"{_NEEDS}; numba is not installed") from e

SIMULATOR = bool(numba.config.ENABLE_CUDASIM)


def check_available() -> None:
    """Raise ImportError unless a CUDA device (or numba's simulator) is there."""
    if SIMULATOR:
        return
    try:
        ok = cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken driver install is "not available" too
        ok = False
    if not ok:
        raise ImportError(f"{_NEEDS}; no CUDA device found (numba.cuda.is_available() is "
                          "False; NUMBA_ENABLE_CUDASIM=1 runs the backend in numba's "
                          "simulator instead)")


def _find_cupy():
    """CuPy, where it imports and sees the device (never under the simulator)."""
    if SIMULATOR:
        return None
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - not installed, or built for another CUDA
        return None
    return cupy


cupy = None                    # set by init() once the device is known to be there


def init() -> None:
    global cupy
    check_available()
    if not SIMULATOR:
        import_target_registries()
    cupy = _find_cupy()


_TARGET_MODULES = ("numba.cuda.cudadecl", "numba.cuda.cudamath", "numba.cuda.fp16")


def import_target_registries() -> None:
    """Import numba-cuda's typing and lowering registries (which its CUDA target would
    import at the first compile) where they would fail to import under this NumPy.

    numba-cuda up to 0.30.4 (the newest on PyPI, 2026-11) registers an overload of
    `np.row_stack` when its `numba.cuda.np.arrayobj` is imported; NumPy 2.5 removed
    row_stack, so every kernel's first compile raised "module 'numpy' has no attribute
    'row_stack'" (seen on an H100 with numpy 2.5.2). Here the modules are imported with a
    stand-in function under that name, removed again at once: the overload it gets is one
    nothing can call. Nothing is done where NumPy still has row_stack."""
    if hasattr(np, "row_stack"):
        return
    np.row_stack = lambda *arrays, **kwargs: np.vstack(*arrays, **kwargs)
    try:
        for name in _TARGET_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:                  # another numba-cuda's layout: its own way
                pass
    finally:
        del np.row_stack


# ---- buffers ---------------------------------------------------------------------------------
# dtypes that live in device memory; others stay host NumPy arrays
ON_DEVICE = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))


def is_device(buf) -> bool:
    return hasattr(buf, "copy_to_host")


def to_device(value):
    """A host value as a device array (kept on the host where its dtype can't go there)."""
    if is_device(value):
        return value
    value = np.asarray(value)
    if value.dtype not in ON_DEVICE:
        return value
    if not value.flags.c_contiguous:
        value = value.copy(order="C")
    return cuda.to_device(value)


def to_host(buf) -> np.ndarray:
    if type(buf) is np.ndarray:
        return buf
    if is_device(buf):
        return buf.copy_to_host()
    return np.asarray(buf)


def empty(shape, dtype):
    return cuda.device_array(tuple(shape), np.dtype(dtype))


def flat(buf):
    """A 1-D view of a C-contiguous device array (a 0-d array as shape (1,))."""
    if len(buf.shape) == 1:
        return buf
    return buf.reshape(math.prod(buf.shape))


def synchronize() -> None:
    cuda.synchronize()


# ---- kernels -----------------------------------------------------------------------------------
THREADS_PER_BLOCK = 32 if SIMULATOR else 256


_LAUNCHERS: dict = {}                # (kernel, blocks, threads per block) -> kernel[...]


def launch(kernel, threads: int, *args) -> None:
    """kernel[blocks, tpb](*args) over `threads` threads (a 1-D grid); nothing for 0.

    The configured kernel is kept per grid: numba-cuda builds a launch configuration on
    each `kernel[...]`, and warns there about grids of under 128 blocks. Grids here follow
    the data's size, so a small array gets a small grid on purpose: that warning is left
    out (once per grid, when the configuration is made)."""
    if threads <= 0:
        return
    tpb = min(THREADS_PER_BLOCK, threads)
    blocks = (threads + tpb - 1) // tpb
    if SIMULATOR:                       # its kernel[...] reconfigures and returns the kernel
        return kernel[blocks, tpb](*args)
    run = _LAUNCHERS.get((kernel, blocks, tpb))
    if run is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*Grid size .* GPU under-utilization")
            run = _LAUNCHERS[kernel, blocks, tpb] = kernel[blocks, tpb]
    run(*args)


@cuda.jit(device=True)
def idiv(a, b):
    """a / b for integers, rounded toward zero (lax.div); 0 where b == 0."""
    if b == 0:
        return a - a
    if b == -1:
        return -a
    q = a // b
    if q * b != a and (a < 0) != (b < 0):              # floor -> toward zero
        q += 1
    return q


@cuda.jit(device=True)
def irem(a, b):
    """a - b * idiv(a, b): the remainder with the sign of a (np.fmod); 0 where b == 0."""
    if b == 0 or b == -1:
        return a - a
    return a - b * idiv(a, b)


@cuda.jit(device=True)
def fmaximum(a, b):
    """max(a, b); NaN if either is NaN (np.maximum)."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b


@cuda.jit(device=True)
def fminimum(a, b):
    """min(a, b); NaN if either is NaN (np.minimum)."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a < b else b


@cuda.jit(device=True)
def radd(a, b):
    """A sum's accumulation step."""
    return a + b


rmaximum = fmaximum
rminimum = fminimum
DEVICE_FUNCTIONS = {"idiv": idiv, "irem": irem, "fmaximum": fmaximum, "fminimum": fminimum,
                    "radd": radd, "rmaximum": rmaximum, "rminimum": rminimum}


def _sim_math():
    """`math` for kernels run by the simulator: NumPy's ufuncs, dtype-preserving."""
    from scipy import special
    return types.SimpleNamespace(
        exp=np.exp, log=np.log, log1p=np.log1p, expm1=np.expm1, tanh=np.tanh, sqrt=np.sqrt,
        floor=np.floor, ceil=np.ceil, trunc=np.trunc, isfinite=np.isfinite, isnan=np.isnan,
        copysign=np.copysign, fmod=np.fmod, pow=np.power, sin=np.sin, cos=np.cos, tan=np.tan,
        asin=np.arcsin, acos=np.arccos, atan=np.arctan, atan2=np.arctan2, sinh=np.sinh,
        cosh=np.cosh, asinh=np.arcsinh, acosh=np.arccosh, atanh=np.arctanh, erf=special.erf,
        erfc=special.erfc)


_KERNELS: dict = {}                 # source sha -> kernel
_SIM_QUIET = '''

def {name}_quiet(*args):
    with np.errstate(all="ignore"):        # the simulator: NumPy scalars would warn
        {name}(*args)
'''


def load_kernel(source: str, name: str):
    """The `numba.cuda.jit` kernel `name` defined by `source` (compiled at its first launch,
    per argument types; one per distinct source)."""
    sha = hashlib.sha256(source.encode()).hexdigest()[:24]
    kernel = _KERNELS.get(sha)
    if kernel is not None:
        return kernel
    namespace = dict(DEVICE_FUNCTIONS, np=np, cuda=cuda, numba=numba,
                     math=_sim_math() if SIMULATOR else math, __name__=f"fnad_cuda_{sha}")
    text = source + (_SIM_QUIET.format(name=name) if SIMULATOR else "")
    exec(compile(text, f"<fnad cuda kernel {sha}>", "exec"), namespace)
    fn = namespace[f"{name}_quiet" if SIMULATOR else name]
    kernel = _KERNELS[sha] = cuda.jit(fn)
    return kernel
