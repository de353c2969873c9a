"""The `llvm` kernel compiler of the numba backend (the default; FNAD_KERNEL_COMPILER=numba
compiles with numba; backends/numba_cpu/llvm_kernels.py): the same generated kernels
compiled by fnad's own translator and llvmlite instead of numba must give numba's results
bit for bit (NaN, inf,
integer wraparound included), on threads and strided inputs too, and fall back to numba
for what the translator does not cover. The fuzzer's programs agree to rounding: on Intel's
AVX-512 CPUs (Sapphire/Emerald Rapids) LLVM vectorizes some sums in another order and
contracts some of mathfns' a*b + c into FMAs at other places for the two IRs (log1p: 1 ulp
in a sixth of the values), where on AMD's Zen 5 they were bit-identical too."""
import numpy as np
import pytest
from fuzz_programs import build, program

import fnad
import fnad.numpy as jnp
from fnad.backends.numba_cpu import llvm_kernels


def both(f, *args, kernels=True):
    """f under jit on the numba backend, compiled by numba and by the llvm compiler:
    (numba's outputs, llvm's outputs, the llvm compiler's fallbacks meanwhile, the llvm
    kernels called). With `kernels`, the program must have called some."""
    from fnad.backends.numba_cpu import codegen
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(llvm_kernels, "ENABLED", False)
        want = fnad.jit(f, backend="numba")(*args)
    before = len(llvm_kernels.FALLBACKS)
    calls = []
    call = llvm_kernels.Kernel.__call__

    def counted(self, *a):
        calls.append(self.name)
        return call(self, *a)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(llvm_kernels, "ENABLED", True)
        mp.setattr(llvm_kernels, "_KERNELS", {})      # new Kernels and drivers: their first
        mp.setattr(codegen, "_DRIVERS", {})           # calls go through Kernel.__call__
        mp.setattr(llvm_kernels.Kernel, "__call__", counted)
        got = fnad.jit(lambda *a: f(*a), backend="numba")(*args)    # a new trace and build
    assert calls or not kernels, "no kernel ran through the llvm compiler"
    return want, got, llvm_kernels.FALLBACKS[before:], calls


def assert_same_bits(want, got):
    for w, g in zip(fnad.tree_util.tree_leaves(want), fnad.tree_util.tree_leaves(got),
                    strict=True):
        w, g = np.asarray(w), np.asarray(g)
        assert (w.dtype, w.shape) == (g.dtype, g.shape)
        if w.dtype.kind == "f":
            w, g = w.view(f"u{w.dtype.itemsize}"), g.view(f"u{g.dtype.itemsize}")
        np.testing.assert_array_equal(g, w)


RNG = np.random.default_rng(3)
BIG = RNG.standard_normal((640, 512)).astype(np.float32)            # threaded kernels
BIG[::97, ::13] = np.nan
BIG[5, :7] = [np.inf, -np.inf, 0.0, -0.0, 1e-40, 88.7, -104.5]


def _layer_norm(x, g):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * fnad.lax.rsqrt(v + 1e-5) * g


PROGRAMS = {
    "softmax rows": (lambda x: fnad.nn.softmax(x, axis=-1), (BIG,)),
    "log_softmax and logsumexp": (lambda x: (fnad.nn.log_softmax(x), fnad.nn.logsumexp(x, 0)),
                                  (BIG,)),
    "exact and tanh gelu": (lambda x: (fnad.nn.gelu(x, approximate=False), fnad.nn.gelu(x)),
                            (BIG,)),
    "exp log tanh logistic erf": (
        lambda x: jnp.exp(x) + jnp.log(jnp.abs(x)) * jnp.tanh(x) - fnad.nn.sigmoid(x)
        + fnad.lax.erf(x) - jnp.expm1(x) / jnp.log1p(jnp.abs(x)), (BIG,)),
    "layer norm, strided operand": (lambda x, g: _layer_norm(x.T, g), (BIG, BIG[:, 0])),
    "silu gate times up, float64": (lambda a, b: fnad.nn.silu(a) * b,
                                    (BIG[:300].astype(np.float64), BIG[300:600].astype(
                                        np.float64))),
    "max min argmax sums": (lambda x: (jnp.max(x, 0), jnp.min(x, 1), jnp.argmax(x, 1),
                                       jnp.sum(x * x, 1), jnp.prod(x[:8], 0)), (BIG,)),
    "int32 floor division, remainder, wraparound": (
        lambda a, b: (a // b, a % b, a * b + 2 ** 30, fnad.lax.div(a, b), fnad.lax.rem(a, b)),
        (RNG.integers(-2 ** 31, 2 ** 31 - 1, (600, 600), dtype=np.int32),
         RNG.integers(-3, 4, (600, 600), dtype=np.int32))),
    "uint8 and bool": (lambda a, m: (jnp.where(m, a + a, a // 3), m & (a > 100), ~m),
                       (RNG.integers(0, 256, (700, 400), dtype=np.uint8),
                        RNG.random((700, 400)) < 0.5)),
    "adamw update": (lambda p, g, m, v: (
        p - 1e-3 * ((0.9 * m + 0.1 * g) / (jnp.sqrt(0.999 * v + 0.001 * g * g) + 1e-8)
                    + 0.01 * p), 0.9 * m + 0.1 * g), (BIG, BIG[::-1].copy(), BIG * 0.5,
                                                       np.abs(BIG))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bit_identical_to_numba(name):
    f, args = PROGRAMS[name]
    want, got, fallbacks, _ = both(f, *args)
    assert_same_bits(want, got)
    assert not fallbacks, fallbacks                        # all of it translated


def assert_same_to_rounding(want, got):
    """Integers and booleans bit for bit, NaN and inf where the other has them, finite floats
    to rounding (a few ulps, carried through the program's later steps)."""
    for w, g in zip(fnad.tree_util.tree_leaves(want), fnad.tree_util.tree_leaves(got),
                    strict=True):
        w, g = np.asarray(w), np.asarray(g)
        assert (w.dtype, w.shape) == (g.dtype, g.shape)
        if w.dtype.kind not in "fc":
            np.testing.assert_array_equal(g, w)
            continue
        parts = [(w, g)] if w.dtype.kind == "f" else [(w.real, g.real), (w.imag, g.imag)]
        for wp, gp in parts:
            np.testing.assert_array_equal(np.isnan(gp), np.isnan(wp))
            np.testing.assert_array_equal(np.isposinf(gp), np.isposinf(wp))
            np.testing.assert_array_equal(np.isneginf(gp), np.isneginf(wp))
            finite = np.isfinite(wp)
            tol = 1e-4 if wp.dtype.itemsize == 4 else 1e-10
            scale = max(1.0, float(np.max(np.abs(wp[finite]), initial=0.0)))
            np.testing.assert_allclose(gp[finite], wp[finite], rtol=tol, atol=tol * scale)


def test_random_programs_agree():
    """The differential fuzzer's programs (small shapes, every dtype it draws)."""
    ran, kernels = 0, 0
    for seed in range(24):
        ins, steps, seeds, data = program(seed)
        xs = [jnp.asarray(x, d) for x, (_, d) in zip(data, ins, strict=True)]
        f = build(fnad, jnp, steps, seeds)
        try:
            f(*xs)
        except Exception:  # noqa: BLE001 - not a valid program (a dtype error...)
            continue
        want, got, _, calls = both(f, *xs, kernels=False)    # some programs fuse nothing
        assert_same_to_rounding(want, got)
        ran, kernels = ran + 1, kernels + len(calls)
    assert ran >= 15 and kernels >= 10, (ran, kernels)


UNSUPPORTED = """
import numba
import numpy as np
from fnad.backends.numba_cpu.runtime import empty


@numba.njit(error_model='numpy', nogil=True)
def k_unsupported(sz, a0, s0):
    n0 = sz[0]
    assert n0 >= 0
    o0 = empty(s0, np.float32)
    for i0 in range(n0):
        o0[i0] = a0[i0] * np.float32(2.0)
    return (o0, )
"""


def test_falls_back_to_numba_for_what_it_does_not_cover():
    namespace = {}
    exec(UNSUPPORTED, namespace)                  # noqa: S102 - a kernel source, as codegen's
    kernel = llvm_kernels.Kernel("k_unsupported", UNSUPPORTED,
                                 lambda: namespace["k_unsupported"])
    x = np.arange(5, dtype=np.float32)
    before = len(llvm_kernels.FALLBACKS)
    (out,) = kernel(np.array([5], np.uint64), x, 5)                # `assert`: not translated
    np.testing.assert_array_equal(out, 2 * x)
    reasons = [r for _, r in llvm_kernels.FALLBACKS[before:]]
    assert any("statement Assert" in r for r in reasons), reasons
    (out,) = kernel(np.array([3], np.uint64), x[::2].copy(), 3)
    np.testing.assert_array_equal(out, 2 * x[::2])
    (out,) = kernel(np.array([2], np.uint64), x[::2], 2)   # not contiguous: numba's dispatcher
    np.testing.assert_array_equal(out, 2 * x[::2][:2])


def bound_kernel(name: str, source: str):
    """(the llvm Kernel of `source`'s function `name`, a driver namespace bound to it)."""
    namespace = {}
    exec(source, namespace)                       # noqa: S102 - a kernel source, as codegen's
    kernel = llvm_kernels.Kernel(name, source, lambda: namespace[name])
    driver = {}
    kernel.bind(driver)
    return kernel, driver


SUPPORTED = UNSUPPORTED.replace("    assert n0 >= 0\n", "").replace("k_unsupported", "k_supported")


def test_the_compiled_builtin_checks_its_arguments():
    kernel, driver = bound_kernel("k_supported", SUPPORTED)
    x = np.arange(6, dtype=np.float32)
    size = np.array([6], np.uint64)
    before = len(llvm_kernels.FALLBACKS)
    (out,) = kernel(size, x, 6)                   # compiles; the driver now calls the builtin
    np.testing.assert_array_equal(out, 2 * x)
    fast = driver["k_supported"]
    assert fast is not kernel and type(fast).__name__ == "builtin_function_or_method"
    (out,) = fast(size, x, 6)
    np.testing.assert_array_equal(out, 2 * x)
    assert llvm_kernels.FALLBACKS[before:] == []
    (out,) = fast(size, x.astype(np.float64), 6)  # another dtype: compiled for it
    np.testing.assert_array_equal(out, 2 * x)
    assert len(kernel._machines) == 2 and llvm_kernels.FALLBACKS[before:] == []
    (out,) = fast(size, x, np.int64(6))           # a NumPy int: as an int, the builtin again
    np.testing.assert_array_equal(out, 2 * x)
    (out,) = fast(size, x, np.uint32(6))
    np.testing.assert_array_equal(out, 2 * x)
    assert llvm_kernels.FALLBACKS[before:] == []
    (out,) = fast(np.array([3], np.uint64), x[::2], 3)    # not contiguous: numba's dispatcher
    np.testing.assert_array_equal(out, 2 * x[::2])
    with pytest.raises(TypeError):                # the wrong number of arguments: numba's error
        fast(size, x)


def test_large_outputs_start_on_a_cache_line():
    """Outputs of 4 KB and more (the builtin's, and the driver's for threaded kernels) start
    on a 64-byte boundary, as numba's allocations: vector stores then do not straddle
    cache lines (np.empty's large blocks start 16 bytes past a page)."""
    kernel, driver = bound_kernel("k_aligned", SUPPORTED.replace("k_supported", "k_aligned"))
    x = np.arange(5000, dtype=np.float32)
    kernel(np.array([3], np.uint64), x[:3], 3)
    for n in (1024, 1031, 5000):                  # 4096 bytes and more
        (out,) = driver["k_aligned"](np.array([n], np.uint64), x[:n].copy(), n)
        assert out.ctypes.data % 64 == 0 and out.shape == (n,)
        np.testing.assert_array_equal(out, 2 * x[:n])
    (small,) = driver["k_aligned"](np.array([7], np.uint64), x[:7].copy(), 7)
    np.testing.assert_array_equal(small, 2 * x[:7])
    big = np.random.default_rng(0).standard_normal((512, 600)).astype(np.float32)
    f = fnad.jit(lambda a: jnp.exp(a) * 3.0)
    assert "run_threaded(" in f.lower(big).as_text()
    for _ in range(3):                            # a threaded kernel: the driver allocates
        out = np.asarray(f(big))
        assert out.ctypes.data % 64 == 0
        np.testing.assert_allclose(out, np.exp(big) * 3, rtol=1e-6)


ROW_SUMS = """
import numba
import numpy as np
from fnad.backends.numba_cpu.runtime import empty


@numba.njit(error_model='numpy', nogil=True)
def k_row_sums(sz, a0, s0):
    n0 = sz[0]
    n1 = sz[1]
    o0 = empty(s0, np.float32)
    b0 = empty(n1, np.float32)
    for i0 in range(n0):
        b1 = empty(n1, np.float32)
        for i1 in range(n1):
            b0[i1] = a0[i0 * n1 + i1]
            b1[i1] = b0[i1]
        r0 = np.float32(0.0)
        for i1 in range(n1):
            r0 = r0 + b1[i1]
        o0[i0] = r0
    return (o0, )
"""


def test_a_row_buffer_that_cannot_be_allocated_raises_memory_error():
    kernel, driver = bound_kernel("k_row_sums", ROW_SUMS)
    x = np.arange(6, dtype=np.float32)
    before = len(llvm_kernels.FALLBACKS)
    (out,) = kernel(np.array([2, 3], np.uint64), x, 2)
    np.testing.assert_array_equal(out, [3, 12])
    fast = driver["k_row_sums"]
    assert type(fast).__name__ == "builtin_function_or_method"
    for _ in range(3):                            # 2^60 bytes a row: aligned_alloc fails
        with pytest.raises(MemoryError):
            fast(np.array([2, 1 << 58], np.uint64), x, 2)
    (out,) = fast(np.array([3, 2], np.uint64), x, 3)      # and the builtin still works
    np.testing.assert_array_equal(out, [1, 5, 9])
    assert llvm_kernels.FALLBACKS[before:] == []


def test_the_object_layouts_the_builtins_read_hold_here():
    """CPython 3.11 on 64-bit Linux with NumPy 2 (CI's): the llvm compiler may be used."""
    assert llvm_kernels.layout_as_assumed()


_WITHOUT_NUMBA = """
import sys
import numpy as np
import fnad, fnad.numpy as jnp

def step(w, x):      # fused elementwise + reductions, a GEMM, a convolution, their gradients
    def loss(w):
        h = jnp.tanh(x @ w) * 0.5 + jnp.exp(-x[:, :1] ** 2)
        c = fnad.lax.conv(x.reshape(8, 1, 64, 64), w[:3, :3].reshape(1, 1, 3, 3), (1, 1),
                          "SAME")
        return (jnp.mean(jax_nn_logsumexp(h, axis=-1)) + jnp.sum(jnp.abs(w)) * 1e-3
                + jnp.mean(c ** 2))
    value, g = fnad.value_and_grad(loss)(w)
    return value, w - 0.1 * g

jax_nn_logsumexp = fnad.nn.logsumexp
rng = np.random.default_rng(0)
w = rng.standard_normal((64, 32)).astype(np.float32)
x = rng.standard_normal((512, 64)).astype(np.float32)
value, w2 = fnad.jit(step)(w, x)
print("numba imported", "numba" in sys.modules)
print("value", repr(float(value)), float(np.asarray(w2, np.float64).sum()))
"""


def test_programs_the_translator_covers_run_without_importing_numba(tmp_path):
    """Compiled by fnad's translator, a program's first call imports no numba (0.3-0.45 s
    of a fresh process's first call), cold and from the disk cache: the worker threads'
    spin loop is llvmlite's (threads.py), the kernels' names and versions are read without
    it (scalar_ops.MATHFNS, codegen._stamp), a convolution's patch fillers are kernels
    too (conv.py). The numbers are the NumPy reference's."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, FNAD_CACHE_DIR=str(tmp_path), FNAD_KERNEL_COMPILER="llvm",
               FNAD_NUM_THREADS="2")
    runs = [subprocess.run([sys.executable, "-c", _WITHOUT_NUMBA], env=env, check=True,
                           capture_output=True, text=True, timeout=300).stdout
            for _ in range(2)]                                   # cold, then warm
    for out in runs:
        assert "numba imported False" in out, out
    assert runs[0].split("value")[1] == runs[1].split("value")[1]
    ref = subprocess.run([sys.executable, "-c", _WITHOUT_NUMBA.replace(
        "fnad.jit(step)", "fnad.jit(step, backend='numpy')")], env=env, check=True,
        capture_output=True, text=True, timeout=300).stdout
    got, want = (float(r.split("value ")[1].split()[0]) for r in (runs[0], ref))
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.fixture
def helper_allowed(tmp_path, monkeypatch):
    """An empty cache dir (tmp_path), the llvm compiler with new Kernels and drivers, and
    its helper process allowed (conftest turns it off for the suite) on two CPUs."""
    from fnad.backends.numba_cpu import codegen
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FNAD_LLVM_HELPER", raising=False)
    monkeypatch.setattr(llvm_kernels, "ENABLED", True)
    monkeypatch.setattr(llvm_kernels, "_KERNELS", {})
    monkeypatch.setattr(codegen, "_DRIVERS", {})
    monkeypatch.setattr("fnad.backends.numba_cpu.threads.usable_cpus", lambda: 2)


def test_a_helper_process_compiles_a_cold_programs_kernels(helper_allowed, tmp_path,
                                                           monkeypatch):
    """compile_ahead: for a program with HELPER_MIN kernel signatures or more to compile, a
    helper process compiles them into the cache dir. Run to its end before the first call,
    it leaves this process nothing to translate (the code generator's argument specs name
    the signatures the calls have), and the results are the NumPy reference's."""
    steps = [jnp.tanh, jnp.exp, lambda v: 1 / (1 + jnp.exp(-v)), lambda v: jnp.log1p(v * v),
             jnp.abs, lambda v: jnp.sqrt(v * v + 1), lambda v: jnp.maximum(v, 0.1),
             lambda v: v * v * v, lambda v: jnp.minimum(v, 0.5) - v,
             lambda v: jnp.where(v > 0, v, 2 * v)]

    def f(x, w):
        for step in steps:                        # a product between kernels: no fusion
            x = step(x @ w) + jnp.sum(x, axis=1, keepdims=True) * 1e-3
        return x
    x = RNG.standard_normal((16, 16)).astype(np.float32) * 0.1
    w = RNG.standard_normal((16, 16)).astype(np.float32) * 0.3
    jitted = fnad.jit(f, backend="numba")
    program = jitted.lower(x, w).compile().runtime_executable()
    helper = llvm_kernels.compile_ahead(program._kernels, program._signatures)
    assert helper is not None, "fewer kernel signatures than HELPER_MIN"
    assert helper.wait(timeout=300) == 0
    assert len(list(tmp_path.glob("fnad_llvm_*.pkl"))) >= llvm_kernels.HELPER_MIN
    translated = []
    translate = llvm_kernels.Kernel._translate
    monkeypatch.setattr(llvm_kernels.Kernel, "_translate",
                        lambda self, *a: translated.append(self.name) or translate(self, *a))
    got = jitted(x, w)
    assert translated == []
    assert llvm_kernels.compile_ahead(program._kernels, program._signatures) is None
    monkeypatch.setenv("FNAD_LLVM_HELPER", "no")
    with pytest.raises(ValueError, match="FNAD_LLVM_HELPER='no': expected '1'"):
        llvm_kernels.compile_ahead(program._kernels, program._signatures)
    want = fnad.jit(f, backend="numpy")(x, w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)


def test_a_first_call_races_its_helper(helper_allowed, monkeypatch):
    """The cold first call as users run it: the helper compiling from the program's end
    while this process compiles from its start, each taking what the other left in the
    cache dir; the results are the NumPy reference's."""
    helpers = []
    start = llvm_kernels.compile_ahead
    monkeypatch.setattr(llvm_kernels, "compile_ahead",
                        lambda *a: helpers.append(start(*a)) or helpers[-1])

    def f(x):
        for k in range(12):                     # 12 kernels, products between them
            x = jnp.tanh(x @ x.T * (0.1 + k)) + jnp.exp(-x * x) * k
        return x
    x = RNG.standard_normal((24, 24)).astype(np.float32) * 0.1
    got = fnad.jit(f, backend="numba")(x)
    assert helpers and helpers[0] is not None
    assert helpers[0].wait(timeout=300) == 0
    want = fnad.jit(f, backend="numpy")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)
