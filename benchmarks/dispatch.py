"""Eager per-op dispatch time: fnad vs NumPy vs jax (when installed), in one run.

Two cases: a unary op on 8 floats (pure dispatch overhead) and a binary op on
1000x1000 float32 (dominated by memory traffic). Prints microseconds per call
(best of several repeats) and the fnad/jax ratio. Run:

    python benchmarks/dispatch.py
"""
from __future__ import annotations

import platform
import sys
import timeit

import numpy as np

import fnad
import fnad.lax as lax
import fnad.numpy as fnp


def best_us(fn, number: int, repeat: int = 7) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    small_np = np.linspace(0, 1, 8, dtype=np.float32)
    big_a = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    big_b = np.random.default_rng(1).standard_normal((1000, 1000)).astype(np.float32)
    small, a, b = fnp.asarray(small_np), fnp.asarray(big_a), fnp.asarray(big_b)

    rows = [
        ("sin, 8 x f32", "fnad.numpy.sin", best_us(lambda: fnp.sin(small), 20000)),
        ("sin, 8 x f32", "fnad.lax.sin", best_us(lambda: lax.sin(small), 20000)),
        ("sin, 8 x f32", "numpy.sin", best_us(lambda: np.sin(small_np), 20000)),
        ("add, 1000x1000 f32", "fnad.numpy.add", best_us(lambda: fnp.add(a, b), 50)),
        ("add, 1000x1000 f32", "fnad: a + b", best_us(lambda: a + b, 50)),
        ("add, 1000x1000 f32", "numpy.add", best_us(lambda: np.add(big_a, big_b), 50)),
    ]
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None:
        js, ja, jb = jnp.asarray(small_np), jnp.asarray(big_a), jnp.asarray(big_b)
        rows.append(("sin, 8 x f32", "jax.numpy.sin",
                     best_us(lambda: jnp.sin(js).block_until_ready(), 20000)))
        rows.append(("add, 1000x1000 f32", "jax.numpy.add",
                     best_us(lambda: jnp.add(ja, jb).block_until_ready(), 50)))

    print(f"fnad {fnad.__version__}, numpy {np.__version__}"
          + (f", jax {jax.__version__}" if jax is not None else ", jax not installed")
          + f"; Python {sys.version.split()[0]} on {platform.machine()}")
    print(f"{'case':22s} {'implementation':18s} {'us/call':>10s}")
    for case, impl, us in rows:
        print(f"{case:22s} {impl:18s} {us:10.2f}")
    if jax is not None:
        t = {impl: us for _, impl, us in rows}
        print(f"ratio fnad/jax, sin 8 floats: {t['fnad.numpy.sin'] / t['jax.numpy.sin']:.2f}"
              f"  (target <= 0.5)")
        print(f"ratio fnad/jax, add 1000x1000: {t['fnad.numpy.add'] / t['jax.numpy.add']:.2f}")


if __name__ == "__main__":
    main()
