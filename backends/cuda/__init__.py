"""The `cuda` backend: numba CUDA kernels on an NVIDIA GPU, cuBLAS GEMM through CuPy.

Buffers are numba device arrays (C-contiguous, the aval's shape); values of dtypes no kernel
handles (bfloat16, float0) stay NumPy arrays on the host. `device_put(x, "cuda")` copies to
the device, `np.asarray(x)` copies back.

Eager (`impl_rules`, eager.py): elementwise primitives, reductions, dot_general, iota and
the shape ops (views, or strided-copy kernels: transpose, broadcast, slices, concatenate, pad,
the dynamic slices) run on the device in generated kernels (GEMM through cuBLAS when CuPy
is installed, else a tiled shared-memory matmul kernel); the other primitives
(gather/scatter, sort/top_k, cumulative ops, argmax/argmin, linalg decompositions, ...) and
the arithmetic of float16/bfloat16/complex values go *through the host*: the operands are
copied to NumPy, the reference impl runs, the results are copied back. eager.py's
docstring lists them; `eager.HOST` is the set.

jit (`compile`, program.py): the numba backend's fusion planner groups elementwise chains
and trailing-axis reductions (softmax, RMSNorm, an AdamW update) into one CUDA kernel each;
dot_general and everything else runs the eager impls above on the same device buffers.

Detection: importing this module without a CUDA device raises ImportError saying what is
missing (so `fnad.devices("cuda")` and `device_put(x, "cuda")` do too). With
NUMBA_ENABLE_CUDASIM=1 set before numba is imported, the whole backend runs in numba's CUDA
simulator (a Python thread per CUDA thread: for tests, slow).
"""
from __future__ import annotations

from fnad.backends.cuda import runtime as _rt

_rt.init()                               # ImportError without a CUDA device (or simulator)

name = "cuda"
impl_rules: dict = {}


def device_put(value, device=None):
    """A host value as a device array (bfloat16, float0, ... stay NumPy arrays)."""
    return _rt.to_device(value)


def to_numpy(buf):
    return _rt.to_host(buf)


def block_until_ready(buf) -> None:
    if _rt.is_device(buf):
        _rt.synchronize()


class _Device:
    __slots__ = ("platform", "id", "name")

    def __init__(self, id: int, name: str):
        self.platform, self.id, self.name = "gpu", id, name


def devices() -> list:
    """The CUDA devices numba sees (one simulated device under the simulator)."""
    if _rt.SIMULATOR:
        return [_Device(0, "numba CUDA simulator")]
    from numba import cuda
    return [_Device(i, str(getattr(g, "name", f"cuda:{i}"))) for i, g in enumerate(cuda.gpus)]


from fnad.backends.cuda import eager  # noqa: E402,F401  (fills impl_rules)
from fnad.backends.cuda.program import compile  # noqa: E402,F401,A004
