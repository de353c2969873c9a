"""Random small programs, run by fnad and by an oracle: a differential fuzzer.

A program is a few steps, each a unary or binary op from a table (elementwise math,
reductions, layout, casts, softmax, cumsum, sort, matmul...) on earlier values, over one or
two inputs of random shapes (size-1 dims included, so broadcasting is exercised) and dtypes
(float32, float16, bfloat16, int8, uint8, int32, bool). The same program is written once
against a (library, numpy module) pair, so it runs in fnad and in jax alike. Modes:

    backends  fnad.jit on the numba backend against fnad eager (the NumPy reference)
    eager     fnad eager against jax          jit    fnad.jit against jax.jit
    grad      fnad.grad against jax.grad      vmap   fnad.vmap against jax.vmap

Run many seeds by hand (python tests/fuzz_programs.py MODE FIRST_SEED COUNT): each mismatch
prints its seed, its ops and its inputs. tests/test_fuzz_programs.py runs a few seeds of each
mode in the suite. Known differences that it reports: integer division by zero (fnad: 0,
XLA's CPU code: all ones, docs/differences_from_jax.md) and a few weak-type artifacts of jax.
"""
from __future__ import annotations

import sys

import numpy as np

SIZES = (1, 2, 3, 5)
DTYPES = ("float32", "float32", "float32", "int32", "bool", "float16", "bfloat16", "uint8",
          "int8")


def unary_ops(L, N) -> dict:
    nn, lax = L.nn, L.lax
    return {
        "neg": lambda x: -x, "abs": N.abs, "exp": N.exp, "log": lambda x: N.log(N.abs(x) + 1),
        "tanh": N.tanh, "sin": N.sin, "sqrt": lambda x: N.sqrt(N.abs(x)), "sigmoid": nn.sigmoid,
        "floor": N.floor, "sign": N.sign, "square": N.square, "gelu": nn.gelu, "silu": nn.silu,
        "erf": lambda x: lax.erf(x.astype("float32")), "round": N.round, "isnan": N.isnan,
        "clip": lambda x: N.clip(x, -1, 2), "mod": lambda x: x % 3, "pow2": lambda x: x ** 2,
        "log_softmax": lambda x: nn.log_softmax(x, axis=-1),
        "softmax": lambda x: nn.softmax(x, axis=0), "cumsum": lambda x: N.cumsum(x, axis=-1),
        "sort": lambda x: N.sort(x, axis=-1), "flip": N.flip, "T": lambda x: x.T,
        "rev": lambda x: x[..., ::-1], "sum0": lambda x: N.sum(x, axis=0),
        "max_keep": lambda x: N.max(x, axis=-1, keepdims=True), "var": lambda x: N.var(x, axis=0),
        "mean": lambda x: N.mean(x, axis=-1), "argmax": lambda x: N.argmax(x, axis=-1),
        "prod": lambda x: N.prod(x, axis=0), "logsumexp": lambda x: nn.logsumexp(x, axis=-1),
        "to_f16": lambda x: x.astype("float16"), "to_i32": lambda x: x.astype("int32"),
        "to_bool": lambda x: x.astype("bool"), "to_bf16": lambda x: x.astype("bfloat16"),
        "relu": nn.relu, "pad": lambda x: N.pad(x, 1), "tile": lambda x: N.tile(x, 2),
        "cummax": lambda x: lax.cummax(x, axis=0), "expm1": N.expm1,
        "log1p": lambda x: N.log1p(N.abs(x)), "ravel": lambda x: x.reshape(-1),
        "where0": lambda x: N.where(x > 0, x, 0), "std": N.std, "roll": lambda x: N.roll(x, 1),
        "any": lambda x: N.any(x > 1, axis=0), "diff": lambda x: N.diff(x, axis=-1),
        "softplus": nn.softplus, "arctan": N.arctan, "sinh": N.sinh,
    }


def binary_ops(L, N) -> dict:
    return {
        "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
        "div": lambda x, y: x / y, "maximum": N.maximum, "minimum": N.minimum,
        "where": lambda x, y: N.where(x > y, x, y), "arctan2": N.arctan2,
        "lt": lambda x, y: x < y, "eq": lambda x, y: x == y, "pow": lambda x, y: N.abs(x) ** y,
        "floordiv": lambda x, y: x // y, "rem": lambda x, y: x % y, "hypot": N.hypot,
        "logaddexp": N.logaddexp, "and": lambda x, y: (x > 0) & (y < 1),
        "copysign": N.copysign, "fmod": N.fmod, "outer": N.outer,
        "concat": lambda x, y: N.concatenate([x.reshape(-1), y.reshape(-1)]),
        "matmul": lambda x, y: x @ y.T if x.ndim == y.ndim == 2 and x.shape[1] == y.shape[1]
        else x * y,
        "add_float": lambda x, y: x + 1.5, "mul_int": lambda x, y: 2 * x,
    }


def program(seed: int):
    """(inputs [(shape, dtype)], steps [(kind, op number)], per-step seeds) of `seed`."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.choice(SIZES)) for _ in range(int(rng.integers(1, 3))))
    ins = [(tuple(d if rng.random() < 0.8 else 1 for d in shape), str(rng.choice(DTYPES)))
           for _ in range(int(rng.integers(1, 3)))]
    steps = [("u" if rng.random() < 0.55 else "b", int(rng.integers(0, 10 ** 6)))
             for _ in range(int(rng.integers(1, 6)))]
    data = []
    for s, d in ins:
        x = rng.normal(size=s) * 2
        data.append(x > 0 if d == "bool" else np.abs(x * 3).astype(d) if d == "uint8"
                    else (x * 3).astype(d) if d in ("int8", "int32") else x)
    return ins, steps, [int(v) for v in rng.integers(0, 2 ** 31, len(steps))], data


def build(L, N, steps, seeds):
    """The program as a function of its inputs, written with library L and numpy module N."""
    U, B = unary_ops(L, N), binary_ops(L, N)
    un, bn = sorted(U), sorted(B)

    def f(*xs):
        vals = list(xs)
        for (kind, k), seed in zip(steps, seeds, strict=True):
            r = np.random.default_rng(seed)
            a = vals[int(r.integers(0, len(vals)))]
            if kind == "u":
                vals.append(U[un[k % len(un)]](a))
                continue
            b = vals[int(r.integers(0, len(vals)))]
            try:
                N.broadcast_shapes(a.shape, b.shape)
            except ValueError:
                b = N.sum(b)
            vals.append(B[bn[k % len(bn)]](a, b))
        return vals[-1]
    return f


def op_names(steps) -> list[str]:
    import fnad
    un, bn = sorted(unary_ops(fnad, fnad.numpy)), sorted(binary_ops(fnad, fnad.numpy))
    return [(un if kind == "u" else bn)[k % len(un if kind == "u" else bn)]
            for kind, k in steps]


def mismatch(got, want) -> str | None:
    """None where `got` is `want` (dtype, shape, NaNs, values to the dtype's precision)."""
    a, b = np.asarray(got), np.asarray(want)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{list(a.shape)} against {b.dtype}{list(b.shape)}"
    if a.dtype.kind in "biu":
        return None if np.array_equal(a, b) else "integers differ"
    a, b = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return "NaNs differ"
    tol = {2: 3e-2, 4: 1e-3, 8: 1e-9}[np.asarray(got).dtype.itemsize]
    m = ~np.isnan(a)
    if not np.allclose(a[m], b[m], rtol=tol, atol=tol):
        return f"values differ by up to {np.max(np.abs(a[m] - b[m]))}"
    return None


def _scalar_loss(L, N, f):
    def loss(x0, *rest):
        out = f(x0, *rest)
        if not N.issubdtype(out.dtype, N.floating):
            return N.sum(x0)
        return N.sum(N.where(N.isfinite(out), out, 0).astype("float32"))
    return L.grad(loss)


def run(mode: str, seed: int) -> str | None:
    """A description of how fnad and the oracle differ on program `seed` in `mode`, or None
    (also None where the oracle rejects the program)."""
    import fnad
    ins, steps, seeds, data = program(seed)
    fx = [fnad.numpy.asarray(x, d) for x, (_, d) in zip(data, ins)]
    f = build(fnad, fnad.numpy, steps, seeds)
    if mode == "backends":
        try:
            want = f(*fx)
        except Exception:  # noqa: BLE001 - not a valid program (a dtype error...)
            return None
        return mismatch(fnad.jit(f, backend="numba")(*fx), want)
    import jax
    jx = [jax.numpy.asarray(x, d) for x, (_, d) in zip(data, ins)]
    g = build(jax, jax.numpy, steps, seeds)
    if mode == "grad":
        if jx[0].dtype != jax.numpy.float32:
            return None
        f, g = _scalar_loss(fnad, fnad.numpy, f), _scalar_loss(jax, jax.numpy, g)
    elif mode == "vmap":
        fx = [fnad.numpy.stack([x, ~x if x.dtype == bool else x * 2]) for x in fx]
        jx = [jax.numpy.stack([x, ~x if x.dtype == bool else x * 2]) for x in jx]
        f, g = fnad.vmap(f), jax.vmap(g)
    elif mode == "jit":
        f, g = fnad.jit(f), jax.jit(g)
    try:
        want = g(*jx)
    except Exception:  # noqa: BLE001 - jax rejects it
        return None
    return mismatch(f(*fx), want)


def main(mode: str, first: int, count: int) -> None:
    bad = 0
    for seed in range(first, first + count):
        try:
            why = run(mode, seed)
        except Exception as e:  # noqa: BLE001 - report and go on
            why = f"fnad raised {type(e).__name__}: {str(e)[:160]}"
        if why:
            bad += 1
            ins, steps, _, _ = program(seed)
            print(f"seed {seed}: {why}; ops {op_names(steps)}, inputs {ins}", flush=True)
    print(f"{mode}: {bad} of {count} programs differ")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
