"""Run every benchmark in this folder, one after the other, printing each one's table.

    python benchmarks/run_all.py

Each script measures fnad and its references (jax, NumPy, PyTorch eager when installed:
`pip install -e .[bench]`) in its own process and prints one table with the ratios fnad/jax
and, where torch is installed, fnad/torch; copy the tables into docs/performance.md with
the date.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

# gpu.py: the cuda and xla backends, where a GPU is
SCRIPTS = ["import_time.py", "dispatch.py", "jit_overhead.py", "jit_elementwise.py",
           "mlp_step.py", "gpt_step.py", "gpt_after_idle.py", "gpt_floor.py", "gpt_cold.py",
           "conv_step.py", "moe_step.py", "rnn_step.py", "scan_map.py", "worker_spin.py",
           "numba_math.py", "kernel_compilers.py", "gpu.py"]


def main() -> int:
    here = pathlib.Path(__file__).parent
    failed = []
    for name in SCRIPTS:
        path = here / name
        if not path.exists():
            continue
        print(f"\n=== {name} ===", flush=True)
        rc = subprocess.call([sys.executable, str(path)], cwd=here)
        if rc:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
