"""Time per call of the numba backend's vectorizable math on 1M elements, in one process:

- numba loop calling fnad's mathfns function (what the code generator emits),
- numba loop calling NumPy's/math's function (a scalar libm call: no SVML in pip llvmlite),
- NumPy (SciPy for logistic/erf/erfc), writing into a preallocated output,
- jax.jit of the jax.numpy function (when jax is installed).

All single-threaded except what jax does on its own; with --f64, jax runs with x64 enabled.
Prints milliseconds per call (best of 15 interleaved rounds) and the ratios fnad/libm-loop,
fnad/NumPy and fnad/jax. Run:

    python benchmarks/numba_math.py            # float32
    python benchmarks/numba_math.py --f64      # float32 and float64
"""
from __future__ import annotations

import math
import platform
import sys
import timeit

import numba
import numpy as np
from scipy import special

from fnad.backends.numba_cpu import mathfns, scalar_ops

CALLER_FLAGS = {"arcp", "contract", "afn", "reassoc", "nsz"}   # the code generator's flags
N = 1_000_000

# name -> (input range, libm scalar call for the numba loop, NumPy/SciPy function, jax name)
CASES = {
    "exp": ((-80.0, 80.0), np.exp, np.exp, "exp"),
    "exp2": ((-120.0, 120.0), np.exp2, np.exp2, "exp2"),
    "log": ((1e-3, 1e3), np.log, np.log, "log"),
    "log1p": ((-0.9, 10.0), np.log1p, np.log1p, "log1p"),
    "expm1": ((-10.0, 10.0), np.expm1, np.expm1, "expm1"),
    "tanh": ((-6.0, 6.0), np.tanh, np.tanh, "tanh"),
    "logistic": ((-20.0, 20.0), None, special.expit, "sigmoid"),
    "erf": ((-4.0, 4.0), math.erf, special.erf, "erf"),
    "erfc": ((-4.0, 8.0), math.erfc, special.erfc, "erfc"),
}


def loop(fn):
    """out[i] = fn(a[i]) as the code generator compiles it."""
    @numba.njit(fastmath=CALLER_FLAGS, error_model="numpy")
    def run(a, out):
        for i in range(a.size):
            out[i] = fn(a[i])
    return run


@numba.njit(fastmath=CALLER_FLAGS, error_model="numpy")
def _libm_logistic_loop(a, out):
    for i in range(a.size):
        out[i] = 1 / (1 + np.exp(-a[i]))


def best_ms(fns: dict, rounds: int = 15) -> dict:
    """Min over `rounds` of each function's mean time per call (ms), measured round-robin so
    that load from other processes hits every contender alike."""
    number = {}
    for key, fn in fns.items():
        fn()                                             # compile / warm up
        t = timeit.timeit(fn, number=1)
        number[key] = max(1, min(20, int(0.01 / max(t, 1e-9))))   # ~10 ms per sample
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for key, fn in fns.items():
            best[key] = min(best[key], timeit.timeit(fn, number=number[key]) / number[key])
    return {key: t * 1e3 for key, t in best.items()}


def jax_fn(name):
    try:
        import jax
        import jax.numpy as jnp
        from jax.scipy import special as jspecial
    except ImportError:
        return None
    f = {"sigmoid": jax.nn.sigmoid, "erf": jspecial.erf, "erfc": jspecial.erfc}.get(
        name, getattr(jnp, name, None))
    return jax.jit(f)


def run_table(dtype) -> list[tuple]:
    rows = []
    rng = np.random.default_rng(0)
    for name, ((lo, hi), libm, ref, jname) in CASES.items():
        a = rng.uniform(lo, hi, N).astype(dtype)
        out = np.empty_like(a)
        ours = loop(mathfns.FUNCS[name][dtype])
        libm_loop = _libm_logistic_loop if libm is None else loop(libm)
        fns = {"ours": lambda: ours(a, out), "libm": lambda: libm_loop(a, out),
               "numpy": lambda: ref(a, out=out)}
        jf = jax_fn(jname)
        if jf is not None:
            import jax.numpy as jnp
            ja = jnp.asarray(a)
            fns["jax"] = lambda: jf(ja).block_until_ready()
        t = best_ms(fns)
        t_ours, t_libm, t_np, t_jax = t["ours"], t["libm"], t["numpy"], t.get("jax")
        vec = "yes" if (name, dtype) in scalar_ops.VECTORIZES else "no (libm)"
        rows.append((f"{name} {np.dtype(dtype).name}", vec, t_ours, t_libm, t_np, t_jax))
    return rows


def main() -> None:
    dtypes = [np.float32, np.float64] if "--f64" in sys.argv else [np.float32]
    if np.float64 in dtypes:
        try:   # without x64, jax would silently compute the float64 rows in float32
            import jax
            jax.config.update("jax_enable_x64", True)
        except ImportError:
            pass
    print(f"numba math, {N:,} elements per call, ms (best of 15 rounds); python "
          f"{platform.python_version()}, numba {numba.__version__}, numpy {np.__version__}")
    head = (f"{'function':16s} {'vectorized':>10s} {'fnad loop':>10s} {'libm loop':>10s} "
            f"{'numpy':>8s} {'jax.jit':>8s} {'/libm':>7s} {'/numpy':>7s} {'/jax':>6s}")
    print(head)
    print("-" * len(head))
    for dt in dtypes:
        for label, vec, t_ours, t_libm, t_np, t_jax in run_table(dt):
            jax_cols = (f"{t_jax:8.3f}", f"{t_ours / t_jax:6.2f}") if t_jax else (
                f"{'-':>8s}", f"{'-':>6s}")
            print(f"{label:16s} {vec:>10s} {t_ours:10.3f} {t_libm:10.3f} {t_np:8.3f} "
                  f"{jax_cols[0]} {t_ours / t_libm:7.2f} {t_ours / t_np:7.2f} {jax_cols[1]}")


if __name__ == "__main__":
    main()
