"""The numba backend's code generator: jit(f, backend="numba") against eager NumPy.

Elementwise chains in every supported dtype (with NaN/inf), scalar operands and
broadcasts, the row kernels (softmax, layer norm, RMSNorm), training-style programs (MLP
value_and_grad, a scan RNN and its gradient, embedding gather/scatter), control flow, the
generated source (one fused loop for a chain), the on-disk cache across processes, and
every primitive spec of tests/specs through jit.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba")

import fnad  # noqa: E402
import fnad.numpy as jnp  # noqa: E402
from fnad import lax, tree_util  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def strict_codegen(monkeypatch):
    """A kernel numba cannot compile is an error here (users get a warning and no fusion)."""
    from fnad.backends.numba_cpu import codegen
    monkeypatch.setattr(codegen, "STRICT", True)


def numba_jit(f, **kw):
    return fnad.jit(f, backend="numba", **kw)


def eager(f, *args):
    """f run eagerly on fnad arrays (NumPy array arguments would run NumPy's methods)."""
    return f(*tree_util.tree_map(jnp.asarray, args))


def check(f, *args, rtol=1e-5, atol=1e-6):
    """jit on the numba backend gives what eager execution gives."""
    assert_same(numba_jit(f)(*args), eager(f, *args), rtol=rtol, atol=atol)


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    """Same tree, shapes and dtypes; values within float tolerance (NaN where NaN)."""
    g_leaves, g_tree = tree_util.tree_flatten(got)
    w_leaves, w_tree = tree_util.tree_flatten(want)
    assert g_tree == w_tree
    for g, w in zip(g_leaves, w_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def specials(dtype, shape=(7, 9)):
    """Random values with NaN, +-inf, +-0 and large magnitudes mixed in."""
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 0.5]
    return x


# ---- elementwise chains -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_chain_with_nan_and_inf(dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    def f(a, b):
        y = jnp.tanh(a * b + 1.5) * 0.5 + b / (1 + jnp.exp(-a))
        z = jnp.where(a > b, jnp.log1p(jnp.abs(a)), jnp.sqrt(jnp.abs(b)) - jnp.expm1(b * 0.1))
        m = jnp.maximum(a, b) + jnp.minimum(a, 0.0) + fnad.nn.sigmoid(a) + lax.erf(b)
        return y, z, m, jnp.isfinite(a * b), jnp.clip(a, -1.0, 2.0)
    a, b = specials(dtype), specials(dtype)[::-1].copy()
    check(f, a, b, rtol=2e-6 if dtype == np.float32 else 1e-12)


def test_int32_and_bool_chain():
    def f(i, j, p):
        q = (i * j + 7) // jnp.where(j == 0, 3, j)          # lax.div: toward zero
        r = lax.rem(i, jnp.where(j == 0, 5, j)) - jnp.abs(i) + jnp.maximum(i, j)
        s = (p & (i > j)) | ~p ^ (j < 0)
        return q, r, s, jnp.sign(i) * 3, (i > 0).astype(jnp.int32) + i.astype(jnp.float32)
    i = RNG.integers(-1000, 1000, (6, 5)).astype(np.int32)
    i[0, 0] = np.iinfo(np.int32).min
    j = RNG.integers(-20, 20, (6, 5)).astype(np.int32)
    p = RNG.random((6, 5)) < 0.5
    check(f, i, j, p)


def test_conversions_saturate_like_the_reference():
    def f(x):
        return (x.astype(jnp.int32), x.astype(jnp.uint8), x.astype(jnp.bool_),
                (x * 1e10).astype(jnp.int32), x.astype(jnp.int32).astype(jnp.float32))
    x = specials(np.float32)
    check(f, x)


def test_scalar_operands_and_rank0_programs():
    def f(x, s):
        return x * s + s, jnp.exp(s) * 2.0 - s, lax.integer_pow(x, 3) - lax.integer_pow(s, -2)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    s = np.float32(1.7)
    check(f, x, s)
    check(f, x, np.asarray(s))


def test_broadcasts_are_read_in_place():
    def f(x, b, col, s):
        return jnp.tanh(x + b) * col + s, (x * b).sum(-1), jnp.max(x * col, axis=-1)
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    col = RNG.standard_normal((2, 3, 1)).astype(np.float32)
    s = np.float32(0.25)
    check(f, x, b, col, s)
    check(f, np.asfortranarray(x), b, col, s)              # non-contiguous input


def _rope(x):                                  # x: [B, H, T, hd], pairs interleaved
    even, odd = x[..., ::2], x[..., 1::2]
    angle = jnp.arange(x.shape[-2], dtype=jnp.float32)[:, None] * 0.1
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.stack([even * c - odd * s, even * s + odd * c], -1).reshape(x.shape)


@pytest.mark.parametrize("rows", [4, 256])                 # one thread; threaded
def test_views_are_read_in_place_by_strides(rows):
    # slices (strided, of a transposed view, and one broadcast along a dim), a transpose, a
    # reversal (negative strides: copied at run time); a kernel calling exp copies its
    # view to a contiguous array instead, so that its loops vectorize
    def f(qkv):                                             # [B, T, 3 * H * hd]
        b, t, _ = qkv.shape
        q = qkv[..., :64].reshape(b, t, 4, 16).transpose(0, 2, 1, 3)
        k = qkv[..., 64:128].reshape(b, t, 4, 16).transpose(0, 2, 1, 3)
        q, k = _rope(q), _rope(k)
        flipped = lax.rev(qkv[:, :, 128:], (1,)) * 2.0 + qkv[:, :1, 128:]
        return q, k, fnad.nn.softmax(k[..., ::2].transpose(0, 1, 3, 2) * 3.0, -1), flipped
    x = RNG.standard_normal((rows, 32, 192)).astype(np.float32)
    src = numba_jit(f).lower(x).source
    assert src.count("*S(") == 10, src          # 8 for RoPE, rev, the slice; not softmax
    assert ("run_threaded(" in src) == (rows == 256)
    check(f, x)
    check(f, np.asfortranarray(x))                          # the views of a non-contiguous input
    g = fnad.grad(lambda x: sum(jnp.sum(jnp.sin(o)) for o in f(x)))
    check(g, x, rtol=1e-4, atol=1e-5)


def test_strided_gives_flat_memory_and_element_strides_or_a_copy():
    from fnad.backends.numba_cpu.threads import strided
    base = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    views = {"slice of a transpose": base.transpose(1, 0, 2)[1:5, :, ::3],
             "reversed": base[:, ::-1],
             "read-only broadcast": np.broadcast_to(base[:, :1], (4, 6, 8))}
    for what, v in views.items():
        flat, steps = strided(v)
        assert flat.ndim == 1 and flat.flags.c_contiguous and flat.flags.writeable, what
        for idx in np.ndindex(v.shape):
            assert flat[sum(i * s for i, s in zip(idx, steps))] == v[idx], (what, idx)
    flat, steps = strided(views["slice of a transpose"])
    assert np.shares_memory(flat, base) and steps == (8, 48, 3)     # read in place
    assert not np.shares_memory(strided(views["reversed"])[0], base)


def test_flat_is_a_view_of_a_contiguous_array_and_refuses_others():
    import numba
    from numba.core.errors import TypingError

    from fnad.backends.numba_cpu.runtime import flat

    @numba.njit
    def first_set(a):
        v = flat(a)
        v[0] = -1
        return v

    for shape in [(), (5,), (3, 4), (2, 3, 4)]:
        a = np.arange(max(1, np.prod(shape, dtype=int)), dtype=np.float32).reshape(shape)
        want = a.reshape(-1).copy()
        v = first_set(a)
        want[0] = -1
        assert v.shape == (a.size,) and np.shares_memory(v, a), shape
        np.testing.assert_array_equal(v, want)
        assert a.reshape(-1)[0] == -1, shape                  # written through the view
        del a
        np.testing.assert_array_equal(v, want)                # v keeps a's memory alive
    with pytest.raises(TypingError):
        first_set(np.ones((4, 6), np.float32)[:, ::2])        # not contiguous: no flat view


def test_concatenates_of_views_are_written_into_one_buffer():
    # the shape of the QKV gradient: q and k interleaved back from RoPE's halves,
    # transposed to [B, T, H, hd] and reshaped, joined with v: one buffer, each leaf
    # copied once into its view of it, instead of a copy per concatenate and reshape
    def merge(x1, x2):                                      # [B, H, T, 4] x 2 -> [B, T, 32]
        z = jnp.concatenate([x1.reshape(x1.shape + (1,)), x2.reshape(x2.shape + (1,))], -1)
        return z.reshape(2, 4, 3, 8).transpose(0, 2, 1, 3).reshape(2, 3, 32)

    def f(a, b, v):                                         # v: [B, H, T, 8]
        v2 = v.transpose(0, 2, 1, 3).reshape(2, 3, 32)
        inner = jnp.concatenate([merge(b, a * 2.0), v2], -1)
        return jnp.concatenate([merge(jnp.sin(a), b), inner], -1)

    a, b = (RNG.standard_normal((2, 4, 3, 4)).astype(np.float32) for _ in range(2))
    v = RNG.standard_normal((2, 4, 3, 8)).astype(np.float32)
    src = numba_jit(f).lower(a, b, v).source
    assert src.count("# concatenates written in place") == 1, src
    assert src.count("[...] = ") == 5, src                  # 4 RoPE halves and v
    assert "dimension=" not in src, src                     # no np.concatenate left
    check(f, a, b, v)
    check(f, np.asfortranarray(a), b, v[:, :, ::-1])        # leaves of any layout

    # left as leaves: a concatenate also returned (read twice), and reshapes that are not
    # views of the buffer (in `outer`, [3, 8] of a transposed [3, 2, 4] view; in the last,
    # the rows of a [4, 6] buffer's left half are not one [2, 6] block): `outer` absorbs
    # its transpose only, the last concatenate absorbs nothing and stays np.concatenate
    def g(a, t):                                            # a: [4, 3], t: [2, 6]
        inner = jnp.concatenate([a * 2.0, a], 0)            # [8, 3]
        outer = jnp.concatenate([inner.T.reshape(3, 2, 4).transpose(1, 0, 2), a.T[None]], 0)
        return outer, inner, jnp.concatenate([t.reshape(4, 3), a], 1)
    a, t = RNG.standard_normal((4, 3)).astype(np.float32), RNG.random((2, 6), np.float32)
    src = numba_jit(g).lower(a, t).source
    assert src.count("# concatenates written in place") == 1, src
    assert src.count("[...] = ") == 2 and ".transpose((1, 0, 2))[...] = " in src, src
    check(g, a, t)


def test_fused_chain_is_one_loop_in_the_source():
    f = numba_jit(lambda a, b, c: jnp.tanh(a * b + c) * 0.5 + c / (1 + jnp.exp(-a)))
    x = np.ones((16, 16), np.float32)
    src = f.lower(x, x, x).source
    assert src.count("@numba.njit") == 1, src
    assert src.count("for ") == 1 and "tanh_f32(" in src and "exp_f32(" in src, src
    assert "np.float32(0.5)" in src                       # typed constants
    kernel = src[src.index("# fnad numba backend: generated kernel"):]
    assert ".reshape(" not in kernel                      # flat views: runtime.flat
    check(f.fun, x, x, x)


def test_identical_kernels_are_emitted_once():
    def f(x, y):
        return jnp.tanh(x * 2.0 + 1.0) + jnp.tanh(y * 2.0 + 1.0) @ np.eye(4, dtype=np.float32)
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    src = numba_jit(f).lower(x, x).source
    assert src.count("@numba.njit") == 2, src             # tanh chain once, the add once
    check(f, x, x)


@pytest.mark.usefixtures("numba_compiler")      # numba's own compile path
def test_a_kernel_compiles_once_for_arrays_of_every_rank():
    """The driver passes arrays flat and reshapes the outputs the kernel returns flat, so
    that numba compiles a kernel once whatever the ranks of the arrays it is given (an
    AdamW-style update of a bias and of a weight matrix); the outputs keep their shapes."""
    from fnad.backends.numba_cpu import codegen

    def update(p, g, m):
        m = 0.9 * m + 0.1 * g
        return p - 0.01 * m / (jnp.sqrt(m * m) + 1e-8), m
    names = set()
    for shape in [(6,), (2, 3), (3, 1, 4), (5, 7)]:
        p, g, m = (RNG.standard_normal(shape).astype(np.float32) for _ in range(3))
        fn = numba_jit(update)
        src = fn.lower(p, g, m).source
        names.update(line.split("(")[0][4:] for line in src.splitlines()
                     if line.startswith("def k_"))
        check(update, p, g, m)
        out = fn(p, g, m)
        assert [o.shape for o in out] == [shape, shape]
    assert len(names) == 1, names                           # one kernel source ...
    (name,) = names
    kernel = getattr(codegen._MODULES[name], name)
    assert len(kernel.signatures) == 1, kernel.signatures  # ... compiled for one signature
    assert all(t.ndim <= 1 for t in kernel.signatures[0] if hasattr(t, "ndim"))



def test_kernels_ask_for_512_bit_vectors():
    """Every kernel starts with runtime.wide_vectors(), which marks its LLVM function
    "prefer-vector-width"="512": LLVM's tuning for Intel's AVX-512 CPUs otherwise vectorizes
    with 256-bit registers. (Checked on a fresh njit function: numba shows no IR of code
    loaded from its disk cache.)"""
    import numba

    from fnad.backends.numba_cpu.runtime import wide_vectors

    def f(x):
        return jnp.tanh(x) * 2.0 + 1.0
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    src = numba_jit(f).lower(x).source
    kernels = src.split("def k_")[1:]
    assert kernels and all(k.splitlines()[1].strip() == "wide_vectors()" for k in kernels)

    @numba.njit
    def marked(a):
        wide_vectors()
        return a + 1.0

    @numba.njit
    def plain(a):
        return a + 1.0

    def attributes(fn):
        ir = next(iter(fn.inspect_llvm().values()))
        head = next(line for line in ir.splitlines()
                    if line.startswith("define") and fn.__name__ in line)
        groups = re.findall(r"#(\d+)", head)            # inline, or in attribute groups
        return [head] + [line for line in ir.splitlines()
                         if any(line.startswith(f"attributes #{g} ") for g in groups)]
    assert marked(1.0) == plain(1.0) == 2.0
    assert any('"prefer-vector-width"="512"' in a for a in attributes(marked))
    assert not any('"prefer-vector-width"' in a for a in attributes(plain))


@pytest.mark.usefixtures("numba_compiler")      # numba's own compile path
def test_kernels_run_at_the_signatures_recorded_for_the_compile_children():
    """What the children of a background compile compile (precompile.py, from the argument
    types the code generator records) is what the kernels are then called with, read-only
    inputs included: a read-only argument, a captured read-only constant, iota's read-only
    view and a strided view. Otherwise the first compiled call compiles again in the main
    thread."""
    from fnad.backends.numba_cpu import precompile
    mask = np.tril(np.ones((5, 5), bool))
    mask.flags.writeable = False

    def f(x, y):
        z = jnp.where(mask, jnp.tanh(x * 2.0 + y), 0.0)
        ramp = lax.iota(np.float32, 5) * 0.5 + 1.0
        return z * ramp, x[:, ::2] * 3.0 + 1.0
    x = RNG.standard_normal((5, 5)).astype(np.float32)
    y = RNG.standard_normal((5, 5)).astype(np.float32)
    y.flags.writeable = False
    fn = numba_jit(f)
    assert_same(fn(x, y), eager(f, x, y))
    comp = fn.lower(x, y).compile().runtime_executable()
    assert comp._signatures
    for kernel in comp._kernels:
        recorded = {precompile.numba_signature(spec)
                    for spec in comp._signatures[kernel.__name__]}
        assert set(kernel.signatures) == recorded, (kernel.__name__, kernel.signatures)


# ---- row kernels ---------------------------------------------------------------------------
def _layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b


def _rms_norm(x, g):
    return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g


@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 130), (1, 300)])
def test_softmax_layer_norm_rms_norm(shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 3
    g = RNG.standard_normal(shape[-1]).astype(np.float32)
    b = RNG.standard_normal(shape[-1]).astype(np.float32)
    for f, args in [(lambda x: fnad.nn.softmax(x, axis=-1), (x,)),
                    (lambda x: fnad.nn.log_softmax(x, axis=-1), (x,)),
                    (_layer_norm, (x, g, b)), (_rms_norm, (x, g))]:
        check(f, *args, rtol=1e-5, atol=1e-5)
        src = numba_jit(f).lower(*args).source
        assert src.count("@numba.njit") == 1, src         # one row kernel
        check(fnad.grad(lambda *a, f=f: jnp.sum(f(*a) * x)), *args, rtol=1e-4, atol=1e-5)


def test_reductions_propagate_nan_and_handle_inf():
    def f(x):
        return (jnp.max(x, -1), jnp.min(x, -1), jnp.sum(x, -1), jnp.prod(x, -1),
                jnp.max(x), fnad.nn.softmax(x, axis=-1))
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    x[0, 2] = np.nan
    x[1, :] = -np.inf
    x[2, 3] = np.inf
    check(f, x)
    i = RNG.integers(-50, 50, (4, 6)).astype(np.int32)
    fi = lambda i: (jnp.max(i, -1), jnp.min(i, -1), jnp.sum(i * i, -1), jnp.any(i > 40, -1))
    check(fi, i)


def test_threaded_kernels_match():
    x = RNG.standard_normal((600, 500)).astype(np.float32)     # above the threads threshold
    f = lambda x: (fnad.nn.softmax(x, axis=-1), jnp.tanh(x) * 2.0 + x, jnp.sum(x * x, -1))
    src = numba_jit(f).lower(x).source
    assert "run_threaded(" in src and "nogil=True" in src
    check(f, x)
    check(lambda x: jnp.exp(x[:, None, :] - x[:, :, None]).sum(-1), x[:80])  # [80,500,500]


def test_independent_small_kernels_run_together():
    """An optimizer's update of each parameter: kernels each below the threads threshold,
    none reading another's output, run side by side in one run_together call; the kernel
    reading two of their outputs comes after it."""
    from fnad.backends.numba_cpu import codegen, kernels
    shapes = [(300, 256), (256,), (200, 300), (5,)]
    ps = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    gs = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    ms = [RNG.standard_normal(s).astype(np.float32) for s in shapes]

    def update(ps, gs, ms, lr):
        ms = [0.9 * m + 0.1 * g for m, g in zip(ms, gs)]
        ps = [p - lr * m / (jnp.sqrt(jnp.abs(m)) + 1e-8) for p, m in zip(ps, ms)]
        return ps, ms, jnp.sum(ps[2], axis=0) * ms[1][:1]     # reads two of the updates
    sizes = list(map(np.size, ps))
    assert max(sizes) < kernels.THREADED_MIN and sum(sizes) >= codegen.TOGETHER_MIN
    src = numba_jit(update).lower(ps, gs, ms, np.float32(0.01)).source
    batch = src[src.index("= run_together(("):]
    batch, after = batch.split("\n        ))\n", 1)
    assert batch.count("(k_") == len(shapes), batch   # the four updates in one call
    assert "run_together(" not in after and "= k_" in after
    check(update, ps, gs, ms, np.float32(0.01))
    # below TOGETHER_MIN elements in all: the same kernels one after another
    small = [p[:2] for p in ps], [g[:2] for g in gs], [m[:2] for m in ms]
    assert "run_together(" not in numba_jit(update).lower(*small, np.float32(0.01)).source
    check(update, *small, np.float32(0.01))


def _kernel_outputs(f, *args, recompute=True) -> list[tuple[set, list]]:
    """Each numba kernel of the program jit(f) compiles: (the primitives of its eqns, those
    of the eqns whose values it writes)."""
    from fnad.backends.numba_cpu import codegen, plan
    from fnad.backends.numba_cpu.scalar_ops import fusable
    _, _, eqns, outvars = codegen.flatten(numba_jit(f).lower(*args).jaxpr.jaxpr, [])
    if recompute:
        eqns, steps = plan.plan_recomputing(eqns, outvars, fusable)
    else:
        steps = plan.plan(eqns, outvars, fusable)
    producer = {v: eqns[i].primitive.name for kind, g in steps if kind == "group"
                for i in g.members for v in eqns[i].outvars}
    return [({eqns[i].primitive.name for i in g.members}, sorted(producer[v] for v in g.outputs))
            for kind, g in steps if kind == "group"]


def test_cheap_values_are_recomputed_by_the_kernels_that_read_them(monkeypatch, tmp_path):
    """SwiGLU's backward reads sigmoid(a), its derivative and silu(a): the backward kernels
    compute them again from a instead of the forward kernel writing them (bit for bit the
    same values); a softmax's probabilities, which take a reduction, stay written."""
    a, b = RNG.standard_normal((2, 64, 48)).astype(np.float32)
    w = RNG.standard_normal((48, 8)).astype(np.float32)
    swiglu = lambda a, b, w: jnp.sum(jnp.tanh((fnad.nn.silu(a) * b) @ w))  # noqa: E731
    f = fnad.value_and_grad(swiglu, argnums=(0, 1))
    stored, outs = _kernel_outputs(f, a, b, w, recompute=False), _kernel_outputs(f, a, b, w)
    written = lambda outs: sum(len(o) for _, o in outs)                # noqa: E731
    assert written(stored) - written(outs) == 3, (stored, outs)
    assert any("logistic" in o for _, o in stored)
    assert not any("logistic" in o for _, o in outs), outs
    assert outs[0] == ({"logistic", "mul"}, ["mul"]), outs   # the forward; 1 - s: gone
    check(f, a, b, w, rtol=1e-4, atol=1e-5)        # products summed in another order
    got = numba_jit(f)(a, b, w)
    from fnad.backends.numba_cpu import plan
    with monkeypatch.context() as m:
        m.setattr(plan, "recompute", lambda *args: None)
        m.setenv("FNAD_CACHE_DIR", str(tmp_path))  # generated again, not read back as saved
        want = numba_jit(lambda *args: f(*args))(a, b, w)         # values written, read back
    for x, y in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))    # bit for bit

    soft = fnad.grad(lambda x, w: jnp.sum(jnp.tanh(fnad.nn.softmax(x, axis=-1) @ w)))
    x = RNG.standard_normal((64, 48)).astype(np.float32)
    outs = _kernel_outputs(soft, x, w)
    assert any("div" in o for _, o in outs), outs   # the probabilities, written once
    check(soft, x, w, rtol=1e-4, atol=1e-5)       # sums in another order than NumPy's


def test_softmax_forward_writes_only_the_probabilities():
    """softmax is differentiated through its result (as JAX's: y * (dx - sum(y * dx))), so
    the forward kernel of a training step writes y alone, not exp(x - max) and the sums."""
    w = RNG.standard_normal((48, 8)).astype(np.float32)
    x = RNG.standard_normal((64, 48)).astype(np.float32)
    mask = np.tril(np.ones((64, 48), bool))
    for where in (None, mask):
        f = fnad.grad(lambda x, w: jnp.sum(jnp.tanh(fnad.nn.softmax(x, where=where) @ w)))
        outs = _kernel_outputs(f, x, w)
        forward = [o for m, o in outs if "exp" in m]
        assert forward in ([["div"]], [["select_n"]]), outs
        check(f, x, w, rtol=1e-4, atol=1e-5)


# ---- programs ---------------------------------------------------------------------------------
def _mlp_params():
    r = np.random.default_rng(1)
    return {"w1": (r.standard_normal((20, 32)) * 0.2).astype(np.float32),
            "b1": np.zeros(32, np.float32),
            "w2": (r.standard_normal((32, 5)) * 0.2).astype(np.float32),
            "b2": np.zeros(5, np.float32)}


def _mlp_loss(params, x, y):
    h = fnad.nn.relu(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    logp = fnad.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(logp * fnad.nn.one_hot(y, 5), -1))


def test_mlp_value_and_grad_and_sgd_step():
    params = _mlp_params()
    x = RNG.standard_normal((16, 20)).astype(np.float32)
    y = RNG.integers(0, 5, 16).astype(np.int32)

    def step(params, x, y):
        loss, grads = fnad.value_and_grad(_mlp_loss)(params, x, y)
        return loss, tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    check(step, params, x, y)


def test_scan_rnn_and_its_gradient():
    r = np.random.default_rng(2)
    w = (r.standard_normal((6, 6)) * 0.3).astype(np.float32)
    u = (r.standard_normal((3, 6)) * 0.3).astype(np.float32)
    xs = r.standard_normal((10, 4, 3)).astype(np.float32)

    def loss(w, u, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, jnp.sum(h * h)
        h, ys = lax.scan(cell, jnp.zeros((4, 6), jnp.float32), xs)
        return jnp.sum(h) + jnp.sum(ys)
    check(loss, w, u, xs)
    check(fnad.grad(loss, argnums=(0, 1)), w, u, xs, rtol=1e-4, atol=1e-5)
    rev = lambda xs: lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(3), xs, reverse=True)
    check(rev, xs[:, 0])


def test_cond_and_while():
    def f(x, n):
        y = lax.cond(jnp.sum(x) > 0, lambda x: jnp.exp(x) * 2.0, lambda x: -x, x)
        i, z = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0),
                              (0, x))
        k = lax.switch(n % 3, [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: x - 3.0], x)
        return y, i, z, k
    x = RNG.standard_normal(5).astype(np.float32)
    for n in (0, 4, 7):
        for s in (x, -np.abs(x)):
            check(f, s, np.int32(n))
    g = fnad.grad(lambda x: jnp.sum(lax.cond(jnp.sum(x) > 0, jnp.exp, jnp.sin, x)))
    check(g, x)
    check(g, -np.abs(x))


def test_embedding_gather_scatter_and_grad():
    table = RNG.standard_normal((11, 8)).astype(np.float32)
    ids = RNG.integers(0, 11, (3, 5)).astype(np.int32)
    ids[0, :2] = 4                                             # repeated rows accumulate

    def f(table, ids):
        e = jnp.take(table, ids, axis=0)                       # [3, 5, 8]
        return jnp.sum(jnp.tanh(e) * 2.0)
    check(f, table, ids)
    check(fnad.grad(f), table, ids)
    check(lambda t, ids: t.at[ids[:, 0]].add(1.0).at[2].set(-1.0), table, ids)


def test_sort_argmax_cumsum():
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    x[1, 3] = np.nan
    f = lambda x: (jnp.sort(x, -1), jnp.argmax(x, -1), jnp.cumsum(x, -1), jnp.argsort(x, 0),
                   lax.top_k(x, 3)[1])
    check(f, x)


def test_constants_and_literals_and_passthrough_outputs():
    c = RNG.standard_normal((3, 3)).astype(np.float32)
    f = lambda x, y: (x @ c + 2.0, y, x, jnp.float32(3.0))
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    check(f, x, np.int32(4))


def _inplace_lines(f, *args):
    return [ln for ln in numba_jit(f).lower(*args).source.splitlines() if "in place" in ln]


def test_a_chain_of_dynamic_update_slices_copies_once_and_never_touches_inputs():
    """A KV cache updated by every layer: the first update copies the input, the rest
    write into that copy; results equal eager execution; the caller's array is unchanged."""
    cache = RNG.standard_normal((3, 6, 4)).astype(np.float32)
    u = RNG.standard_normal((1, 2, 4)).astype(np.float32)

    def layers(c, u, i):
        for layer in range(3):
            c = lax.dynamic_update_slice(c, u * (layer + 1), (layer, i, 0))
            u = u + jnp.sum(c[layer]) * 1e-3                  # reads the updated buffer
        return c, u
    before = cache.copy()
    assert_same(numba_jit(layers)(cache, u, np.int32(2)), eager(layers, cache, u, np.int32(2)))
    np.testing.assert_array_equal(cache, before)
    assert len(_inplace_lines(layers, cache, u, np.int32(2))) == 2


def test_dynamic_update_slice_copies_when_the_old_value_is_still_read():
    c = RNG.standard_normal((4, 5)).astype(np.float32)
    u = np.ones((1, 5), np.float32)

    def view_read_later(c, u):
        c1 = lax.dynamic_update_slice(c, u, (0, 0))
        row = c1[1:3].T                                        # views of c1, read after c2
        c2 = lax.dynamic_update_slice(c1, u * 2, (1, 0))
        return c2, row * 3

    def old_value_returned(c, u):
        c1 = lax.dynamic_update_slice(c, u, (0, 0))
        return c1, lax.dynamic_update_slice(c1, u * 2, (0, 0))

    def in_a_loop_body(c, u):
        return lax.fori_loop(0, 3, lambda i, c: lax.dynamic_update_slice(c, u * i, (i, 0)), c)
    for f in (view_read_later, old_value_returned, in_a_loop_body):
        before = c.copy()
        assert_same(numba_jit(f)(c, u), eager(f, c, u))
        np.testing.assert_array_equal(c, before)
        assert _inplace_lines(f, c, u) == [], f.__name__


def test_debug_callback_and_debug_nans_under_jit():
    seen = []

    def f(x):
        y = jnp.sin(x) * 2.0
        fnad.debug.callback(lambda v: seen.append(np.asarray(v).copy()), y)
        return jnp.log(y)
    x = np.array([0.5, -0.5], np.float32)
    out = numba_jit(f)(x)
    assert len(seen) == 1 and np.allclose(seen[0], np.sin(x) * 2.0)
    assert np.isnan(np.asarray(out)[1])
    with fnad.config.override(jax_debug_nans=True):
        with pytest.raises(FloatingPointError, match="nan.*log"):
            numba_jit(f)(x)


def test_a_kernel_numba_rejects_falls_back_with_a_warning(monkeypatch, tmp_path):
    from fnad.backends.numba_cpu import codegen, scalar_ops
    from fnad.primitives import elementwise as ew
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))   # the broken programs stay there
    broken = scalar_ops.Rule("f", lambda E, xs, eqn: f"no_such_function({xs[0]})")
    monkeypatch.setitem(scalar_ops.emit_rules, ew.cosh_p, broken)
    monkeypatch.setattr(codegen, "STRICT", False)
    f = lambda x: jnp.cosh(x * 3.0) + 1.0
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="without fusion"):
        check(f, x)
    monkeypatch.setattr(codegen, "STRICT", True)
    from numba.core.errors import NumbaError
    with pytest.raises(NumbaError):
        numba_jit(lambda x: jnp.cosh(x * 2.0))(x)


# ---- the disk cache ------------------------------------------------------------------------
_CACHE_SCRIPT = textwrap.dedent("""
    import time, numpy as np
    import fnad, fnad.numpy as jnp
    from fnad.backends.numba_cpu import codegen
    generated = []                                 # programs generated (not read back)
    function = codegen._ModuleBuilder.function
    def counted(self, *args, **kwargs):
        generated.append(1)
        return function(self, *args, **kwargs)
    codegen._ModuleBuilder.function = counted
    f = fnad.jit(lambda x: fnad.nn.softmax(jnp.tanh(x) * 2.0, axis=-1), backend="numba")
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    t = time.perf_counter()
    y = f(x)
    print("first-call-seconds", time.perf_counter() - t)
    print("generated", len(generated))
    print("sum", float(np.asarray(y).sum()))
""")


@pytest.mark.usefixtures("numba_compiler")      # numba's own compile path
def test_disk_cache_is_reused_by_a_new_process(tmp_path):
    env = dict(os.environ, FNAD_CACHE_DIR=str(tmp_path), FNAD_BACKGROUND_COMPILE="0")
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], env=env, check=True,
                             capture_output=True, text=True, timeout=300).stdout
        runs.append(out)
        files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
        print(out.strip(), files)                # the compile times, for the curious (-s)
    assert len(list(tmp_path.glob("fnad_k_*.py"))) == 1         # one fused kernel
    assert len(list(tmp_path.glob("fnad_driver_*.py"))) == 1
    programs = list(tmp_path.glob("fnad_program_*.pkl"))         # the generated program
    assert len(programs) == 1, programs
    assert "generated 1" in runs[0] and "generated 0" in runs[1], runs
    index = list(tmp_path.rglob("*.nbi"))
    data = list(tmp_path.rglob("*.nbc"))
    assert index and data, "numba wrote no cache files"
    code = list(tmp_path.glob("*.code"))         # the compiled Python of both modules
    assert len(code) == 2, code
    mtimes = {p: p.stat().st_mtime_ns for p in data}
    code_mtimes = {p: p.stat().st_mtime_ns for p in code}
    program_mtime = programs[0].stat().st_mtime_ns
    subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], env=env, check=True,
                   capture_output=True, text=True, timeout=300)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.nbc")} == mtimes, \
        "the third run recompiled instead of loading the cached kernels"
    assert {p: p.stat().st_mtime_ns for p in code} == code_mtimes, \
        "the third run compiled the generated Python again"
    assert programs[0].stat().st_mtime_ns == program_mtime, "the third run saved it again"
    assert runs[0].split("sum")[1] == runs[1].split("sum")[1]


_PASSES_SCRIPT = textwrap.dedent("""
    import json, numpy as np
    import fnad, fnad.numpy as jnp, fnad.passes
    runs = []                                      # jit's passes (fnad.passes.optimize)
    optimize = fnad.passes.optimize
    def counted(closed, **kwargs):
        runs.append(1)
        return optimize(closed, **kwargs)
    fnad.passes.optimize = counted
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    def loss(x):                                   # (* 1.0, + 0.0: what the passes remove)
        h = jnp.tanh(x @ w) * 1.0
        return jnp.sum(fnad.nn.softmax(h + 0.0, axis=-1) ** 3)
    f = fnad.jit(fnad.value_and_grad(loss))
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    v, g = f(x)
    v2, g2 = f(x + 1)
    at_call = len(runs)
    gg = fnad.grad(lambda x: f(x)[1].sum())(x)     # a transformation takes the optimized jaxpr
    text = f.lower(x).as_text()
    print(json.dumps({"passes": at_call, "after_grad": len(runs), "v": float(v),
                      "g": np.asarray(g).tolist(), "v2": float(v2), "g2": np.asarray(g2).tolist(),
                      "gg": np.asarray(gg).tolist(), "lowered": "# generated code" in text}))
""")


def test_a_new_process_skips_the_passes_of_a_program_compiled_before(tmp_path):
    """jit's traced jaxpr finds the program compiled from it before (`load_traced`: the
    cache dir notes which saved program it became after the passes), so a new process
    runs it without the passes; what needs the optimized jaxpr (grad of the jitted
    function, `lower`) runs them then. With the saved program gone the note leads nowhere
    and the passes run as before. The numbers are the same each time."""
    import json
    env = dict(os.environ, FNAD_CACHE_DIR=str(tmp_path), FNAD_BACKGROUND_COMPILE="0")

    def run():
        return json.loads(subprocess.run([sys.executable, "-c", _PASSES_SCRIPT], env=env,
                                         check=True, capture_output=True, text=True,
                                         timeout=300).stdout)
    cold = run()
    assert cold["passes"] >= 1 and cold["lowered"]
    notes = list(tmp_path.glob("fnad_traced_*"))
    assert len(notes) == 1, notes                 # one program (two calls at one shape)
    program = tmp_path / f"fnad_program_{notes[0].read_text()}.pkl"
    assert program.exists()
    warm = run()
    assert warm["passes"] == 0, warm              # both calls ran without the passes
    assert warm["after_grad"] >= 1 and warm["lowered"]
    program.unlink()
    again = run()
    assert again["passes"] >= 1
    for r in (warm, again):
        for k in ("v", "g", "v2", "g2", "gg"):
            assert r[k] == cold[k], (k, r, cold)
    assert program.exists()                       # generated and saved again


def test_a_note_that_leads_nowhere_or_cannot_be_written_costs_only_the_passes(tmp_path,
                                                                              monkeypatch):
    """In one process, a new jit of the same function finds its program by the note
    (`load_traced`: no passes); a note naming no saved program, or a cache dir where the note
    cannot be written, leaves the passes to run as before, with the same numbers."""
    from fnad.backends.numba_cpu import codegen
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)

    def f(x):
        return jnp.sum(jnp.tanh(x) * 2.0 + 0.0, axis=1), x.T @ x

    def call():
        g = fnad.jit(f, backend="numba")
        out = g(x)
        entry, = g._cache.values()
        return out, entry._closed is not None          # whether the passes ran
    want, passes = call()
    assert passes
    note, = tmp_path.glob("fnad_traced_*")
    again, passes = call()
    assert not passes                                   # found by the note
    note.write_text("no such program")
    third, passes = call()
    assert passes
    note.unlink()
    replace = codegen._replace

    def refuse_notes(path, data):
        if path.name.startswith("fnad_traced_"):
            raise PermissionError(13, "read-only", str(path))
        replace(path, data)
    monkeypatch.setattr(codegen, "_replace", refuse_notes)
    fourth, passes = call()
    assert passes and not list(tmp_path.glob("fnad_traced_*"))
    for out in (again, third, fourth):
        for a, b in zip(out, want):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


_WARM_SCRIPT = textwrap.dedent("""
    import time, numpy as np
    import fnad, fnad.numpy as jnp
    from numba.core.registry import cpu_target
    ctx = cpu_target.target_context
    refreshes = []                     # numba's start of its CPU target (compiles need it)
    refresh = ctx.refresh
    def counted():
        refreshes.append(1)
        return refresh()
    ctx.refresh = counted
    x = np.linspace(-1, 1, 512 * 512, dtype=np.float32).reshape(512, 512)
    f = fnad.jit(lambda x: (jnp.tanh(x) * 2.0 + 1.0) @ x.T, backend="numba")
    y = f(x)
    y = f(x)                             # the workers build their spin loop after the first
    from fnad.backends.numba_cpu import threads
    deadline = time.monotonic() + 60     # (until calibrated)
    while not threads.workers().rounds and time.monotonic() < deadline:
        time.sleep(0.01)
    import sys
    print("refreshes", len(refreshes))
    print("arraymath imported", "numba.np.arraymath" in sys.modules)
    print("arrayobj imported", "numba.np.arrayobj" in sys.modules)
    print("spinning", threads.workers().rounds > 0)
    print("sum", float(np.asarray(y, np.float64).sum()))
""")


@pytest.mark.usefixtures("numba_compiler")      # numba's own compile path
def test_a_warm_process_loads_kernels_without_starting_numbas_target(tmp_path):
    """runtime.load_cached: a new process on a warm disk cache loads the program's kernels
    from it without numba's target refresh (110-150 ms of numba
    imports and registrations, which only compiling needs) or numba's arraymath
    (runtime.before_compiling) and arrayobj (kernels allocate with runtime.empty, whose
    code names no environment of that module), and computes the same."""
    env = dict(os.environ, FNAD_CACHE_DIR=str(tmp_path), FNAD_BACKGROUND_COMPILE="0",
               FNAD_NUM_THREADS="2", FNAD_SPIN_US="1000")
    runs = [subprocess.run([sys.executable, "-c", _WARM_SCRIPT], env=env, check=True,
                           capture_output=True, text=True, timeout=300).stdout
            for _ in range(2)]
    assert "refreshes 0" not in runs[0], runs[0]            # it compiled
    assert "refreshes 0" in runs[1] and "arraymath imported False" in runs[1], runs[1]
    assert "arrayobj imported False" in runs[1], runs[1]          # runtime.empty
    assert "spinning True" in runs[0] and "spinning True" in runs[1], runs
    assert runs[0].split("sum")[1] == runs[1].split("sum")[1]


def test_load_cached_reports_what_the_cache_lacks(tmp_path, monkeypatch):
    """load_cached is False for a signature never compiled (the caller then compiles it
    as usual), True for one loaded already or on disk (a new dispatcher of the function
    loads it from there)."""
    import numba
    from numba.core import types

    from fnad.backends.numba_cpu.codegen import load_module
    from fnad.backends.numba_cpu.runtime import load_cached
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    src = ("import numba\n"
           "@numba.njit(cache=True)\n"
           "def twice_plus_one(a):\n"
           "    return a * 2 + 1\n")
    f = load_module(src, "k_load_cached_probe").twice_plus_one
    assert isinstance(f, numba.core.registry.CPUDispatcher)
    assert load_cached(f, (types.float64,)) is False            # never compiled
    assert f(1.5) == 4.0                                         # compiled and cached
    assert load_cached(f, (types.float64,)) is True              # loaded already
    g = numba.njit(cache=True)(f.py_func)        # a new dispatcher over the same cache
    assert load_cached(g, (types.float64,)) is True and g.signatures == [(types.float64,)]
    assert g(2.0) == 5.0 and g.stats.cache_hits
    assert load_cached(g, (types.int64,)) is False
    assert g(3) == 7


def test_a_saved_program_is_read_back_as_generated(tmp_path, monkeypatch):
    """codegen._save/_saved: the driver, kernels and signatures come back as generated, and
    K rebuilt entry by entry (arrays with their dtype, layout and writeable flag, which
    numba's types see; impls with their params); a damaged file is generated again."""
    import functools

    from fnad.backends import numba_cpu as backend
    from fnad.backends.numba_cpu import codegen
    from fnad.backends.numba_cpu.gemm import Product
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7

    def f(x):
        y = jnp.cumsum(jnp.tanh(x @ w) * 2.0, axis=1)
        return y, lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x), jnp.sort(x, axis=0)
    x = np.linspace(-1, 2, 6, dtype=np.float32).reshape(2, 3)
    closed = fnad.jit(f).lower(x).jaxpr
    key = codegen._program_key(closed, backend, True)
    assert key is not None
    m = codegen._ModuleBuilder(backend, True)
    m.function(closed.jaxpr, closed.consts, "run")
    run = codegen._build(closed, backend, True)[0]          # generates and saves
    driver, kernels, K, signatures = codegen._saved(key, backend)
    assert (driver, kernels, signatures) == (m.driver_source(), m.kernels, m.signatures)
    assert len(K) == len(m.K) and any(type(k) is np.ndarray for k in K)
    for got, want in zip(K, m.K):
        if type(want) is np.ndarray:
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert got.flags.writeable == want.flags.writeable
            assert got.flags.c_contiguous == want.flags.c_contiguous
        elif type(want) is functools.partial:
            assert got.func is want.func and repr(got.keywords) == repr(want.keywords)
        elif type(want) is Product:                    # x @ w, planned again the same
            assert type(got) is Product and repr(got) == repr(want)
        else:
            assert got is want
    assert any(type(k) is Product for k in K)
    again = codegen._build(closed, backend, True)[0]         # read back
    args = [w, x]                                  # (jit passes the constant w as an argument)
    assert len(closed.jaxpr.invars) == len(args)
    for a, b in zip(run(*args), again(*args)):
        np.testing.assert_array_equal(a, b)
    path = tmp_path / f"fnad_program_{key}.pkl"
    path.write_bytes(path.read_bytes()[:40])
    assert codegen._saved(key, backend) is None
    codegen._build(closed, backend, True)
    assert codegen._saved(key, backend) is not None                # generated and saved again
    assert codegen._program_key(closed, backend, False) != key       # unfused: another
    from fnad.backends.numba_cpu import kernels as kernels_module
    monkeypatch.setattr(kernels_module, "THREADED_MIN", 1)      # a generator's threshold:
    assert codegen._program_key(closed, backend, True) != key   # another program too


def test_programs_with_a_user_primitive_or_a_callback_are_not_saved(tmp_path, monkeypatch,
                                                                    scratch_primitives):
    """Their impls and callbacks live in this process only: generated in every process."""
    from fnad.primitives import Primitive, ShapedArray
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    p = Primitive("plus_one")
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype, x.weak_type))
    p.def_impl(lambda x: x + 1, backend="numba")
    seen = []

    def g(x):
        fnad.debug.callback(seen.append, x)
        return jnp.tanh(x) * 3.0
    x = np.ones(4, np.float32)
    np.testing.assert_allclose(fnad.jit(lambda x: p.bind(jnp.tanh(x) * 2.0))(x),
                               np.tanh(1.0) * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(fnad.jit(g)(x), np.tanh(1.0) * 3, rtol=1e-6)
    assert len(seen) == 1
    assert not list(tmp_path.glob("fnad_program_*.pkl"))
    fnad.jit(lambda x: jnp.tanh(x) * 4.0)(x)                       # the control: saved
    assert len(list(tmp_path.glob("fnad_program_*.pkl"))) == 1


def test_compiled_python_is_cached_by_source(tmp_path):
    """codegen._code keeps compile()'s result beside the source, keyed by a hash of it: the
    same source loads it back; another source, or a damaged file, compiles again."""
    from fnad.backends.numba_cpu import codegen
    path = tmp_path / "m.py"
    first = codegen._code("x = 1\n", path)
    cached = list(tmp_path.glob("m.*.code"))
    assert len(cached) == 1 and first.co_filename == str(path)
    assert codegen._code("x = 1\n", path) == first            # loaded back
    ns: dict = {}
    exec(codegen._code("x = 2\n", path), ns)                   # stale entry: compiled
    assert ns["x"] == 2
    cached[0].write_bytes(cached[0].read_bytes()[:30] + b"garbage")
    exec(codegen._code("x = 2\n", path), ns)
    assert ns["x"] == 2

_STARTUP_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, numba
    import fnad, fnad.numpy as jnp
    y = fnad.jit(lambda x: jnp.tanh(x) * 2.0, backend="numba")(np.ones(4, np.float32))
    assert float(np.asarray(y)[0]) == float(np.tanh(np.float32(1)) * 2), y
    print("numba arraymath loaded:", "numba.np.arraymath" in sys.modules)
    print("scipy.linalg loaded:", "scipy.linalg" in sys.modules)
    print("cython_blas loaded:", "scipy.linalg.cython_blas" in sys.modules)

    @numba.njit
    def dot(a, b):                       # numba's np.dot: BLAS through cython_blas
        return np.dot(a, b)
    a = np.arange(9.0).reshape(3, 3)
    assert np.array_equal(dot(a, a), a @ a)
    import scipy.linalg
    import scipy.linalg.cython_blas as cb
    assert scipy.linalg.cython_blas is cb and cb.__pyx_capi__
    assert np.allclose(scipy.linalg.blas.dgemm(1.0, a, a), a @ a)
    print("later imports work")
""")


@pytest.mark.usefixtures("numba_compiler")      # numba's own compile path
def test_the_backend_starts_numba_without_importing_scipy_linalg(tmp_path):
    """numba's arraymath imports scipy.linalg (0.1-0.2 s) to check for BLAS, which fnad's
    kernels do not use: runtime.py loads the cython_blas extension alone for that check and
    removes it again, and later imports of scipy.linalg (numba's np.dot, the user's) work."""
    env = dict(os.environ, FNAD_CACHE_DIR=str(tmp_path), FNAD_BACKGROUND_COMPILE="0")
    out = subprocess.run([sys.executable, "-c", _STARTUP_SCRIPT], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    assert "numba arraymath loaded: True" in out
    assert "scipy.linalg loaded: False" in out
    assert "cython_blas loaded: False" in out
    assert "later imports work" in out


# ---- every primitive spec through jit --------------------------------------------------------
def _one_spec_per_primitive():
    from test_primitives import one_spec_per_primitive
    return one_spec_per_primitive()


SPECS = _one_spec_per_primitive()


@pytest.mark.parametrize("spec", SPECS, ids=[s.prim.name for s in SPECS])
def test_every_primitive_under_jit(spec):
    from test_primitives import _draw, _split
    args = _draw(spec)
    f, dyn, _ = _split(spec, args)
    want = f(*dyn)
    got = numba_jit(f)(*dyn)
    assert_same(got, want, rtol=max(spec.rtol, 2e-6), atol=max(spec.atol, 1e-6))
