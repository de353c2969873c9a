"""Shared helpers for the benchmarks: timing, optional imports, a result table."""
from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np


def median_s(fn, number: int = 1, repeat: int = 15, warmup: int = 2) -> float:
    """Median over `repeat` runs of the time per call of `fn` (seconds)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return float(np.median(times))


def rounds(calls: dict, repeat: int, number: int = 1, warmup: int = 1) -> dict:
    """{name: seconds per call in each round}: after `warmup` untimed calls of each,
    `repeat` rounds of `number` calls of every function in `calls`, the first of each round
    rotating. The shared machine's speed drifts by up to 1.5x within minutes: blocks timed
    one after another measure that drift as much as the functions; rounds give each the
    same conditions."""
    names = list(calls)
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    times: dict = {name: [] for name in names}
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = calls[name]
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - t0) / number)
    return times


def sgd_step(lib, loss, lr: float):
    """step(params, *batch) -> (new params, loss value): `lib.value_and_grad` of `loss` and
    an SGD update, for lib = fnad or jax (the same code run by both)."""
    def step(params, *batch):
        value, grads = lib.value_and_grad(loss)(params, *batch)
        params = lib.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params, value
    return step


def torch_sgd_step(torch, loss, lr: float):
    """step(params, *batch) -> (new params, loss value) in PyTorch eager: autograd of
    `loss(params, *batch)` and an SGD update; params a dict of leaf tensors that require
    grad."""
    def step(params, *batch):
        value = loss(params, *batch)
        grads = torch.autograd.grad(value, list(params.values()))
        with torch.no_grad():
            params = {k: (p - lr * g).requires_grad_()
                      for (k, p), g in zip(params.items(), grads)}
        return params, value.detach()
    return step


def torch_rounds(torch, tstep, params: dict, batch: tuple, fnad_call, losses: dict,
                 repeat: int, number: int) -> dict:
    """PyTorch eager's step `tstep` (torch_sgd_step's signature) from the same NumPy params
    and batch: its loss goes into `losses["torch eager"]`, and it is timed against
    `fnad_call` in rounds (`rounds`: {"fnad.jit": [...], "torch eager": [...]})."""
    pt = {k: torch.tensor(v).requires_grad_() for k, v in params.items()}
    tb = [torch.tensor(b) for b in batch]
    losses["torch eager"] = float(tstep(pt, *tb)[1])
    return rounds({"fnad.jit": fnad_call, "torch eager": lambda: tstep(pt, *tb)},
                  repeat, number)


def check_losses(losses: dict, ref: str = "fnad.jit", tol: float = 1e-4) -> None:
    """Print each implementation's loss; exit with an error if one differs from `ref`'s."""
    print("loss: " + ", ".join(f"{impl} {v:.6f}" for impl, v in losses.items()))
    bad = [impl for impl, v in losses.items() if abs(v - losses[ref]) > tol]
    if bad:
        raise SystemExit(f"loss of {', '.join(bad)} differs from fnad's by > {tol}")


def ratio(times: dict, a: str, b: str) -> float:
    """The median over the rounds of a's time over b's (`times` from `rounds`)."""
    return float(np.median(np.array(times[a]) / np.array(times[b])))


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def header() -> str:
    import fnad
    parts = [f"fnad {fnad.__version__}", f"numpy {np.__version__}"]
    for mod in ("jax", "numba", "torch"):
        m = optional(mod)
        parts.append(f"{mod} {m.__version__}" if m is not None else f"{mod} not installed")
        if mod == "torch" and m is not None:
            parts[-1] += f" ({m.get_num_threads()} threads)"
    return ", ".join(parts) + f"; Python {sys.version.split()[0]} on {platform.machine()}"


def table(rows, title: str, ratios: tuple = ("ratio",)) -> str:
    """rows: (case, implementation, seconds, ratio-or-None, ...): one ratio per name in
    `ratios`, each column headed by its name; a row may leave trailing ratios out, or give
    more of them as None (the columns of a reference that is not installed)."""
    width = max(8, *(len(r) for r in ratios))
    lines = [title, f"{'case':34s} {'implementation':22s} {'time':>12s}"
             + "".join(f" {r:>{width}s}" for r in ratios)]
    for case, impl, sec, *rs in rows:
        t = f"{sec * 1e6:9.2f} us" if sec < 1e-3 else f"{sec * 1e3:9.2f} ms"
        if any(r is not None for r in rs[len(ratios):]):
            raise ValueError(f"table: row {case!r}, {impl!r} has more ratios than {ratios}")
        rs = (list(rs) + [None] * len(ratios))[:len(ratios)]
        cells = "".join(f" {'':>{width}s}" if r is None else f" {r:{width}.2f}" for r in rs)
        lines.append(f"{case:34s} {impl:22s} {t:>12s}{cells}".rstrip())
    return "\n".join(lines)


def wait_compiled(jitted, *args) -> float:
    """Seconds until a background compile of `jitted` at `args` is done (fnad's numba
    backend runs a new program interpreted meanwhile; 0 for anything else)."""
    lower = getattr(jitted, "lower", None)
    if lower is None or not hasattr(jitted, "_fast"):          # not an fnad.jit function
        return 0.0
    t0 = time.perf_counter()
    wait = getattr(lower(*args).compile().runtime_executable(), "wait", None)
    if wait is not None:
        wait()
    return time.perf_counter() - t0


def in_fresh_process(code: str, **env: str) -> dict:
    """Run `code` in a new Python process (in this folder, with os.environ plus `env`) and
    return the JSON object printed on its last line of output."""
    here = pathlib.Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                         capture_output=True, text=True, check=True, cwd=here)
    return json.loads(out.stdout.strip().splitlines()[-1])
