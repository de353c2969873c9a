"""Wall time of `import fnad` in fresh processes (median of N), and what it loaded.

    python benchmarks/import_time.py [N]

Python compiles fnad's sources on the first import; later imports read the cached
bytecode, which is what is measured (the script warms the cache first). Where
PYTHONDONTWRITEBYTECODE=1 is set and no bytecode exists, every import pays that
compile as well.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys

CODE = ("import time; t = time.perf_counter(); import fnad; d = time.perf_counter() - t; "
        "import sys; print(d, *[m for m in ('numba', 'jax', 'scipy') if m in sys.modules])")


def measure(n: int, env: dict) -> tuple[float, list[str]]:
    times, loaded = [], []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        times.append(float(out[0]))
        loaded = out[1:]
    return statistics.median(times), loaded


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import fnad"], env=cached, check=True)  # warm .pyc
    t, loaded = measure(n, cached)
    print(f"import fnad: {t * 1000:.0f} ms (median of {n} fresh processes; target < 300 ms); "
          f"numba/jax/scipy loaded: {loaded or 'none'}")


if __name__ == "__main__":
    main()
