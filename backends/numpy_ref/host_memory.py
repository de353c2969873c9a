"""Host memory policy for the backends whose buffers are NumPy arrays (numpy, numba).

A train step allocates and frees the same large arrays (activations, gradients, GEMM
results) every call. glibc's malloc serves blocks above its mmap threshold with fresh
`mmap`s and unmaps them on free, and trims the heap's free top back to the system; either
way the next step's arrays start as untouched pages, and each page costs a fault (with
transparent huge pages, a 2 MiB page zeroed at once); on the development machine (a VM)
fresh memory costs about 1 ms per MB. The GPT train step of benchmarks/gpt_step.py took
278-298 ms per step with glibc's defaults and 172-181 ms with freed memory kept (the step
alone in a loop, alternating; docs/performance.md). XLA and PyTorch avoid the same cost
with their own caching allocators.

`keep_freed_memory()` sets, once per process and only where the C library is glibc,
`M_MMAP_THRESHOLD` to 32 MiB (glibc's own upper bound for its sliding threshold: larger
arrays are still mapped and unmapped) and `M_TRIM_THRESHOLD` to 64 MiB (the free top of the
heap is given back only beyond that). The cost is that up to that much freed memory stays
with the process. `FNAD_KEEP_FREED_MEMORY=0` leaves malloc as it is.
"""
from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3        # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's thresholds as above (once); True if they are in effect."""
    global _applied
    if _applied is None:
        _applied = _set_thresholds()
    return _applied


def _set_thresholds() -> bool:
    if os.environ.get("FNAD_KEEP_FREED_MEMORY", "1").strip().lower() in ("0", "false", "no",
                                                                          "off"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt                     # glibc (and some others) only
        libc.gnu_get_libc_version                  # noqa: B018  (glibc: the values above)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
