"""The host memory policy of the NumPy-buffer backends (backends/numpy_ref/host_memory.py):
with glibc, freed arrays below 32 MiB stay with the process for the next ones (no fresh
pages to fault in every train step); FNAD_KEEP_FREED_MEMORY=0 leaves malloc alone."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest


def _glibc() -> bool:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
        return True
    except (OSError, AttributeError):
        return False


pytestmark = pytest.mark.skipif(not (_glibc() and os.path.exists("/proc/self/statm")),
                                reason="the policy applies to glibc's malloc (Linux) only")

CHILD = r"""
import json, os
import numpy as np
import fnad.numpy as fnp
from fnad.backends.numpy_ref import host_memory
fnp.zeros(3) + 1                                   # the numpy backend is loaded
page = os.sysconf("SC_PAGE_SIZE")

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page

x = np.ones(3 << 20, np.float32)                   # 12 MiB, every page touched
held = rss()
del x
print(json.dumps({"applied": host_memory.keep_freed_memory(),
                  "returned_mib": (held - rss()) / 2**20}))
"""


def run_child(**env) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         env=dict(os.environ, **env), timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_freed_arrays_stay_with_the_process():
    kept = run_child()
    assert kept["applied"] is True
    assert kept["returned_mib"] < 4, kept            # the 12 MiB stay for the next arrays


def test_opt_out_leaves_glibc_defaults():
    default = run_child(FNAD_KEEP_FREED_MEMORY="0")
    assert default["applied"] is False
    assert default["returned_mib"] > 8, default      # mapped, then unmapped on free
