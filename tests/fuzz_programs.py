"""Random small programs, run by fnad and by an oracle: a differential fuzzer.

A program is one to seven steps, each on an earlier value (the latest one half the time),
over one or two inputs of random shapes (size-1 dims included, so broadcasting is exercised)
and dtypes (float32, float16, bfloat16, int8, uint8, int32, bool). A step is a unary, binary
or ternary op from a table (elementwise math, reductions over axes tuples, layout and
indexing: strided slices, take, .at[] updates, dynamic slices; casts, softmax, cumulative
ops, sort, matmul, convolutions...) or a control-flow step (cond, switch, scan, fori_loop,
while_loop, map, a recurrent cell) whose bodies are random chains of shape-keeping ops that
close over an earlier value.
The program returns every step's value, so no step is dead code. It is written once against
a (library, numpy module) pair, so it runs in fnad and in jax alike. Modes:

    backends      fnad.jit on the numba backend against fnad eager (the NumPy reference);
                  odd seeds pass column-major buffers
    backends_xla  fnad.jit on the xla backend against fnad eager
    backends_grad jit(grad(loss)) on the numba backend against the same jaxpr interpreted
    eager     fnad eager against jax          jit       fnad.jit against jax.jit
    grad      fnad.grad against jax.grad      vmap      fnad.vmap against jax.vmap
    jit_grad  jit(grad(loss))                 grad_jit  grad(loss of jit(f))
    vmap_grad vmap(grad(loss)), each against the same composition in jax

Run many seeds by hand (python tests/fuzz_programs.py MODE FIRST_SEED COUNT, with the
numba backend's background compile off, so jit runs the compiled code): each mismatch
prints its seed, its ops and its inputs. tests/test_fuzz_programs.py runs a few seeds of each
mode in the suite. Known differences that it reports, all on jax's side: integer division by
zero (fnad: 0, XLA's CPU code: all ones, docs/differences_from_jax.md); jax's log_softmax of
uint8 (x - max wraps around: -inf everywhere; fnad computes in float32); `bool * float` where
the float is NaN (XLA's CPU code gives 0, IEEE and fnad NaN); the derivative of x ** y in x
at x = 0, y = 0 (jax: NaN, fnad: 0, as x^0 is 1 everywhere); sin of huge float32 arguments
(exp(14) rounds one ulp apart in NumPy and XLA, and sin amplifies the difference); a few
weak-type artifacts of jax; 16-bit floats, where XLA keeps some intermediates in float32
(an f16 multiply-add fused under jax.jit, one rounding fewer than jax's eager mode and
NumPy) and a while loop or a large power turns one rounding apart into a large difference
(seeds 988, 1938 and 1978 of session 30's conv programs, where the numba backend agrees
with the NumPy reference). The floor of a tanh near saturation differs in every mode that
compares fnad's eager (NumPy) with a compiled program: NumPy rounds tanh(9) to 1 - 2^-24,
XLA's tanh gives 1 from x = 8 on, and the numba backend's vectorized tanh from about 8.3 on
(within its documented 3 ulps; a form exact there cost 20 % of its speed).
"""
from __future__ import annotations

import sys

import numpy as np

SIZES = (1, 2, 3, 5, 8)
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
        # layout and indexing (0-d values pass through the ops that need an axis)
        "step2": lambda x: x[::2] if x.ndim else x,
        "neg_step": lambda x: x[..., -1::-2] if x.ndim else x,
        "neg_start": lambda x: x[-2:] if x.ndim else x,
        "mid": lambda x: x[..., 1:-1] if x.ndim else x,
        "reshape_rev": lambda x: x.reshape(x.shape[::-1]),
        "reshape_2": lambda x: x.reshape(-1, 1) if x.size % 2 else x.reshape(2, -1),
        "perm": lambda x: N.transpose(x, (*range(1, x.ndim), 0)) if x.ndim else x,
        "swap": lambda x: N.swapaxes(x[None], 0, -1),
        "bcast": lambda x: N.broadcast_to(x, (2, *x.shape)),
        "bcast_1": lambda x: N.broadcast_to(x[..., :1], (*x.shape[:-1], 3)) if x.ndim else x,
        "expand": lambda x: N.expand_dims(x, (0, -1)), "squeeze": N.squeeze,
        "take": lambda x: N.take(x, np.array([0, -1, 0]), axis=0) if x.ndim else x,
        "take_last": lambda x: N.take(x, np.array([[1], [-2]]) % x.shape[-1], axis=-1)
        if x.ndim else x,
        "take_along": lambda x: N.take_along_axis(x, N.argmin(x, axis=-1, keepdims=True),
                                                  axis=-1) if x.ndim else x,
        "take_along_0": lambda x: N.take_along_axis(
            x, np.arange(x.size).reshape(x.shape)[::-1] * 7 % x.shape[0], axis=0)
        if x.ndim else x,
        "at_set": lambda x: x.at[..., 0].set(1) if x.ndim else x.at[()].set(0),
        "at_add": lambda x: x.at[np.array([0, 0, -1])].add(1) if x.ndim else x,
        "at_min": lambda x: x.at[np.array([-1, 0, -1])].min(0) if x.ndim else x,
        "at_max": lambda x: x.at[..., -1:].max(x[..., :1]) if x.ndim else x,
        "at_mul": lambda x: x.at[1:].multiply(2) if x.ndim else x,
        "dslice": lambda x: lax.dynamic_slice(x, (1,) * x.ndim, [min(d, 2) for d in x.shape]),
        "dslice_traced": lambda x: lax.dynamic_slice(
            x, (N.argmax(x.reshape(-1)), *[0] * (x.ndim - 1)),
            [min(d, 2) for d in x.shape]) if x.ndim else x,
        "dupdate": lambda x: lax.dynamic_update_slice(
            x, N.flip(x[:2]), (N.argmin(x.reshape(-1)), *[0] * (x.ndim - 1)))
        if x.ndim else x,
        # reductions over axes tuples, cumulative ops
        "sum_axes": lambda x: N.sum(x, axis=tuple(range(0, x.ndim, 2)), keepdims=True),
        "min_axes": lambda x: N.min(x, axis=tuple(range(x.ndim))[-2:]),
        "max_neg": lambda x: N.max(x, axis=-2) if x.ndim > 1 else N.max(x),
        "mean_keep": lambda x: N.mean(x, axis=(-1,), keepdims=True) if x.ndim else x,
        "min": N.min, "argmin": lambda x: N.argmin(x, axis=0) if x.ndim else x,
        "argmin_keep": lambda x: N.argmin(x, axis=-1, keepdims=True) if x.ndim else x,
        "all": lambda x: N.all(x > 0, axis=0 if x.ndim else None),
        "all_keep": lambda x: N.all(x, axis=-1, keepdims=True) if x.ndim else N.all(x),
        "cumprod": lambda x: N.cumprod(x, axis=0) if x.ndim else x,
        "cumlse": lambda x: lax.cumlogsumexp(x * 1.0, axis=x.ndim - 1, reverse=True)
        if x.ndim else x,
        "cummin_rev": lambda x: lax.cummin(x, axis=0, reverse=True) if x.ndim else x,
    }


def ternary_ops(L, N) -> dict:
    return {
        "where3": lambda c, x, y: N.where(c > 0, x, y),
        "where_bool": lambda c, x, y: N.where(c.astype(bool), x, -y),
        "clip3": lambda c, x, y: N.clip(c, x, y), "fma": lambda c, x, y: c * x + y,
        "select": lambda c, x, y: L.lax.select(c < 1, x.astype("float32"), y.astype("float32")),
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
        "stack": lambda x, y: N.stack(N.broadcast_arrays(x, y), axis=-1),
        "concat_0": lambda x, y: N.concatenate(N.broadcast_arrays(x, y), axis=0)
        if max(x.ndim, y.ndim) else N.stack([x, y]),
        # convolutions (their gradients are convolutions too: a weight gradient, and an lhs-
        # dilated one for the strided kind)
        "conv": lambda x, y: _conv(L, N, x, y, 1, 1, 1, (1, 1)),
        "conv_strided": lambda x, y: _conv(L, N, x, y, 2, 1, 1, (1, 0)),
        "conv_lhs_dilated": lambda x, y: _conv(L, N, x, y, 1, 2, 1, (1, 1)),
        "conv_rhs_dilated": lambda x, y: _conv(L, N, x, y, 1, 1, 2, (2, 1)),
    }


def _conv(L, N, a, b, stride, lhs_dilation, rhs_dilation, padding):
    """`a` as a 1-D convolution's input [1, C, S] (C: its first dim where it has two), times
    a kernel [3, C, 2] made from b (a tanh of its mean)."""
    x = a if N.issubdtype(a.dtype, N.floating) else a.astype("float32")
    x = x.reshape((1,) + (x.shape if x.ndim == 2 else (1, x.size)))
    c = x.shape[1]
    w = N.tanh(N.arange(6 * c).reshape(3, c, 2) * 0.3 + N.mean(b.astype("float32")))
    return L.lax.conv_general_dilated(x, w.astype(x.dtype), (stride,), [padding],
                                      lhs_dilation=(lhs_dilation,),
                                      rhs_dilation=(rhs_dilation,))[0]


CONTROL = ("cond", "switch", "scan", "scan_rev", "fori", "fori_traced", "while", "map",
           "map_batched", "scan_rnn")


def chain_ops(L, N) -> dict:
    """The ops of the bodies of control-flow steps: they keep shapes (0-d values too)."""
    U = unary_ops(L, N)
    ops = {k: U[k] for k in ("neg", "abs", "tanh", "sin", "square", "sigmoid", "floor", "sign",
                             "clip", "relu", "softplus", "log", "sqrt", "exp", "mod", "arctan",
                             "flip", "roll", "at_set", "at_mul", "cummax")}
    ops.update({
        "rev": lambda x: x[::-1] if x.ndim else x,
        "cumsum": lambda x: N.cumsum(x, axis=-1) if x.ndim else x,
        "softmax": lambda x: L.nn.softmax(x, axis=-1) if x.ndim else x,
        "sort": lambda x: N.sort(x, axis=0) if x.ndim else x,
        "cond": lambda x: L.lax.cond(N.sum(x) > 0, N.sin, lambda y: y * 0.5, x),
    })
    return ops


def chain(L, N, r, side, dt):
    """A random body: one to three chain_ops (drawn from r), cast back to dt; half of them
    add `side`, a value the body closes over."""
    C = chain_ops(L, N)
    names = [sorted(C)[int(i)] for i in r.integers(0, len(C), int(r.integers(1, 4)))]
    mix = r.random() < 0.5

    def g(x):
        for name in names:
            x = C[name](x)
        return (x + side).astype(dt) if mix else x.astype(dt)
    return g


def control_step(L, N, name, a, b, r):
    """Control-flow step `name` on a (cast to float32 unless floating), its predicate or index
    read from b, its bodies random chains (drawn from r) closing over a value of b."""
    lax = L.lax
    dt = a.dtype if N.issubdtype(a.dtype, N.floating) else N.float32
    a = a.astype(dt)
    side = N.tanh(N.mean(b.astype("float32")))
    g1, g2, g3 = (chain(L, N, r, side, dt) for _ in range(3))
    n, pick = int(r.integers(0, 4)), int(r.integers(0, 3))
    if name == "cond":
        return lax.cond(N.sum(b) > 0, g1, g2, a)
    if name == "switch":
        return lax.switch(N.sum(b > 0).astype("int32") - 1, [g1, g2, g3], a)
    if name == "fori":
        return lax.fori_loop(0, n, lambda i, c: g1(c + i.astype(dt) * 0.25), a)
    if name == "fori_traced":                           # a while loop (not reverse-differentiable)
        return lax.fori_loop(N.sum(b > 0) - 2, n, lambda i, c: g1(c) * 0.5, a)
    if name == "while":
        def body(s):
            return s[0] + 1, g1(s[1])
        return lax.while_loop(lambda s: (s[0] < n) & (N.sum(s[1]) < 1e3), body,
                              (N.zeros((), "int32"), a))[1]
    if name in ("map", "map_batched"):
        return lax.map(g1, a, batch_size=2 if name == "map_batched" else None) if a.ndim else g1(a)
    if name == "scan_rnn":
        return _recurrent_cell(N, lax, a, side, dt, g1, g2, g3, r)
    if a.ndim == 0:                                     # scan without xs
        carry, ys = lax.scan(lambda c, _: (g1(c), g2(c) * 2), a, None, length=n + 1,
                             reverse=name == "scan_rev")
        return ys if pick else carry

    def step(carry, x):
        c, acc = carry
        c = g1(c + x)
        return (c, acc + N.sum(c)), g2(c * x)
    (c, acc), ys = lax.scan(step, (a[0], N.zeros((), dt)), a, reverse=name == "scan_rev")
    return (ys, c, acc)[pick]


def _recurrent_cell(N, lax, a, side, dt, g1, g2, g3, r):
    """A recurrent cell over the leading axis of `a` (a batch of two rows per step): what
    jit's scan hoisting rewrites (products of the xs and of the consts alone, elementwise
    work on the xs, carries that sum products, a sum and an xs slice, ys that are xs), under
    random activations g1 and g2. One of its results, drawn from r (the others are dead)."""
    a2 = a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, 1)
    xs = N.stack([a2, g3(a2)], axis=1)                 # [T, 2, D]
    d, h = a2.shape[1], 3
    w_x = N.tanh(N.arange(d * h).reshape(d, h) * 0.3 + side).astype(dt)
    w_h = (N.eye(h) * 0.5 + side * 0.1).astype(dt)

    def cell(carry, x):
        s, g_w, g_b, total = carry
        z = x @ w_x + s @ w_h + N.sum(w_x @ w_h, axis=0)
        return ((g1(z), g_w + s.T @ z, g_b + N.sum(z, axis=0), total + x),
                (g2(x * 2), x, x @ w_x))
    init = (N.zeros((2, h), dt), N.zeros((h, h), dt), N.zeros((h,), dt), N.zeros_like(xs[0]))
    carry, ys = lax.scan(cell, init, xs, reverse=bool(r.random() < 0.5))
    return (*carry, *ys)[int(r.integers(0, 7))]


def program(seed: int):
    """(inputs [(shape, dtype)], steps [(kind, op number)], per-step seeds) of `seed`."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.choice(SIZES)) for _ in range(int(rng.integers(1, 3))))
    ins = [(tuple(d if rng.random() < 0.8 else 1 for d in shape), str(rng.choice(DTYPES)))
           for _ in range(int(rng.integers(1, 3)))]
    steps = [(str(rng.choice(["u", "b", "t", "c"], p=[0.45, 0.3, 0.07, 0.18])),
              int(rng.integers(0, 10 ** 6))) for _ in range(int(rng.integers(1, 8)))]
    data = []
    for s, d in ins:
        x = rng.normal(size=s) * 2
        data.append(x > 0 if d == "bool" else np.abs(x * 3).astype(d) if d == "uint8"
                    else (x * 3).astype(d) if d in ("int8", "int32") else x)
    return ins, steps, [int(v) for v in rng.integers(0, 2 ** 31, len(steps))], data


def build(L, N, steps, seeds):
    """The program as a function of its inputs, written with library L and numpy module N."""
    U, B, T = unary_ops(L, N), binary_ops(L, N), ternary_ops(L, N)
    un, bn, tn = sorted(U), sorted(B), sorted(T)

    def fit(shape, b):
        try:
            N.broadcast_shapes(shape, b.shape)
            return b
        except ValueError:
            return N.sum(b)

    def f(*xs):
        vals = list(xs)
        for (kind, k), seed in zip(steps, seeds, strict=True):
            r = np.random.default_rng(seed)
            a = vals[-1 if r.random() < 0.5 else int(r.integers(0, len(vals)))]
            if kind == "u":
                vals.append(U[un[k % len(un)]](a))
                continue
            b = vals[int(r.integers(0, len(vals)))]
            if kind == "c":
                vals.append(control_step(L, N, CONTROL[k % len(CONTROL)], a, b, r))
                continue
            b = fit(a.shape, b)
            if kind == "b":
                vals.append(B[bn[k % len(bn)]](a, b))
                continue
            c = fit(N.broadcast_shapes(a.shape, b.shape), vals[int(r.integers(0, len(vals)))])
            vals.append(T[tn[k % len(tn)]](a, b, c))
        return tuple(vals[len(xs):])                    # every step live: none is dead code
    return f


def op_names(steps) -> list[str]:
    import fnad
    N = fnad.numpy
    names = {"u": sorted(unary_ops(fnad, N)), "b": sorted(binary_ops(fnad, N)),
             "t": sorted(ternary_ops(fnad, N)), "c": CONTROL}
    return [names[kind][k % len(names[kind])] for kind, k in steps]


def mismatch(got, want) -> str | None:
    """None where `got` is `want` (dtype, shape, NaNs, values to the dtype's precision); a
    tuple of outputs is compared output by output."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return f"{type(got).__name__} of outputs against {len(want)} outputs"
        return next((f"output {i}: {why}" for i, (g, w) in enumerate(zip(got, want))
                     for why in [mismatch(g, w)] if why), None)
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
        outs = [o for o in f(x0, *rest) if N.issubdtype(o.dtype, N.floating)]
        return sum((N.sum(N.where(N.isfinite(o), o, 0).astype("float32")) for o in outs),
                   start=N.sum(x0) * 0.5)
    return L.grad(loss)


def run(mode: str, seed: int) -> str | None:
    """A description of how fnad and the oracle differ on program `seed` in `mode`, or None
    (also None where the oracle rejects the program)."""
    import fnad
    ins, steps, seeds, data = program(seed)
    fx = [fnad.numpy.asarray(x, d) for x, (_, d) in zip(data, ins)]
    if mode.startswith("backends") and seed % 2:       # column-major buffers into jit
        fx = [fnad.numpy.asarray(np.asfortranarray(np.asarray(x))) for x in fx]
    f = build(fnad, fnad.numpy, steps, seeds)
    if "grad" in mode and ins[0][1] != "float32":
        return None
    if mode.startswith("backends"):
        if mode == "backends_grad":         # the reference: the same jaxpr, interpreted
            f = _scalar_loss(fnad, fnad.numpy, f)
        try:
            want = fnad.jit(f, backend="numpy")(*fx) if mode == "backends_grad" else f(*fx)
        except Exception:  # noqa: BLE001 - not a valid program (a dtype error...)
            return None
        return mismatch(fnad.jit(f, backend="xla" if mode == "backends_xla" else "numba")(*fx),
                        want)
    import jax
    jx = [jax.numpy.asarray(x, d) for x, (_, d) in zip(data, ins)]
    g = build(jax, jax.numpy, steps, seeds)
    if mode == "grad_jit":
        f, g = fnad.jit(f), jax.jit(g)
    if "grad" in mode:
        f, g = _scalar_loss(fnad, fnad.numpy, f), _scalar_loss(jax, jax.numpy, g)
    if mode in ("vmap", "vmap_grad"):
        fx = [fnad.numpy.stack([x, ~x if x.dtype == bool else x * 2]) for x in fx]
        jx = [jax.numpy.stack([x, ~x if x.dtype == bool else x * 2]) for x in jx]
        f, g = fnad.vmap(f), jax.vmap(g)
    elif mode in ("jit", "jit_grad"):
        f, g = fnad.jit(f), jax.jit(g)
    try:
        want = g(*jx)
    except Exception:  # noqa: BLE001 - jax rejects it
        return None
    return mismatch(f(*fx), want)


def main(mode: str, first: int, count: int) -> None:
    import fnad
    from fnad.backends.numba_cpu import codegen
    fnad.config.update("jax_background_compile", False)     # else jit runs the interpreter
    codegen.STRICT = True                        # a kernel numba rejects is an error
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
