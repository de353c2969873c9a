"""The numba backend's background compile (config.jax_background_compile).

A program whose kernels are neither loaded nor in the disk cache runs on the NumPy
interpreter while a child process compiles its kernels into the disk cache; the call
after the child is done loads them and runs compiled. Each test uses its own cache dir
and a constant no other test uses, so its kernels are new to the process.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")

import fnad  # noqa: E402
import fnad.numpy as jnp  # noqa: E402
from fnad.backends.numba_cpu import codegen, precompile  # noqa: E402
from fnad.config import config  # noqa: E402

# The background compile is the numba kernel compiler's (the llvm one compiles in the
# foreground, fast enough not to need it).
pytestmark = pytest.mark.usefixtures("numba_compiler")

X = np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codegen, "STRICT", True)
    with config.override(jax_background_compile=True):
        yield tmp_path


def program(c: float):
    def f(x):      # one kernel: an elementwise chain, a row sum and its broadcast
        y = jnp.tanh(x * c + 0.5) * x
        return y - jnp.sum(y, axis=1, keepdims=True) / c
    return f


def two_kernel_program(c: float):
    def f(x):      # a kernel on each side of a matrix product
        y = jnp.tanh(x * c + 0.5)
        return jnp.exp(-(y @ y.T)) * c
    return f


def eager(f, x):
    return np.asarray(f(jnp.asarray(x)))


def test_runs_interpreted_then_loads_what_the_child_compiled(fresh_cache):
    f = program(1.2345)
    jf = fnad.jit(f)
    first = np.asarray(jf(X))
    comp = jf.lower(X).compile().runtime_executable()
    np.testing.assert_allclose(first, eager(f, X), rtol=1e-6, atol=1e-6)
    assert comp._signatures, "the code generator recorded no kernel signatures"
    comp.wait()
    assert not comp.compiling
    assert precompile.markers_present(fresh_cache, comp._signatures)
    assert not comp._checked                # no compiled call yet, and yet the kernels are
    for kernel in comp._kernels:            # loaded (precompile.load_when_compiled)
        assert kernel.signatures and kernel.stats.cache_hits, kernel.stats
    second = np.asarray(jf(X))
    np.testing.assert_allclose(second, eager(f, X), rtol=1e-6, atol=1e-6)
    for kernel in comp._kernels:          # loaded from the child's disk cache, not compiled
        assert kernel.stats.cache_hits and not kernel.stats.cache_misses, kernel.stats
    assert comp._checked and comp._job is None


def test_child_imports_the_installed_fnad_from_any_working_directory(fresh_cache, tmp_path,
                                                                    monkeypatch):
    # run from a checkout (the README's quickstart runs `fnad-train` in one) a `fnad/`
    # directory in the working directory must not shadow the installed package in the
    # child (`python -m` puts the working directory first on sys.path)
    work = tmp_path / "checkout"
    (work / "fnad").mkdir(parents=True)
    (work / "fnad" / "__init__.py").write_text("raise ImportError('the checkout, not fnad')\n")
    monkeypatch.chdir(work)
    f = program(0.75)
    comp = fnad.jit(f).lower(X).compile().runtime_executable()
    assert comp._signatures
    proc = precompile.start(fresh_cache, comp._signatures)
    assert proc.wait(timeout=300) == 0
    assert precompile.markers_present(fresh_cache, comp._signatures)


def test_compiles_in_the_foreground_when_off(fresh_cache):
    f = program(2.3456)
    jf = fnad.jit(f)
    with config.override(jax_background_compile=False):
        out = np.asarray(jf(X))
        comp = jf.lower(X).compile().runtime_executable()
    assert comp._job is None and comp._checked
    assert all(k.signatures for k in comp._kernels)
    assert precompile.markers_present(fresh_cache, comp._signatures)   # for the next process
    np.testing.assert_allclose(out, eager(f, X), rtol=1e-6, atol=1e-6)


def test_a_failed_child_falls_back_to_compiling_here(fresh_cache, monkeypatch):
    def failing(cache, signatures):
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    monkeypatch.setattr(precompile, "start", failing)
    f = program(3.4567)
    jf = fnad.jit(f)
    np.testing.assert_allclose(np.asarray(jf(X)), eager(f, X), rtol=1e-6, atol=1e-6)
    comp = jf.lower(X).compile().runtime_executable()
    comp.wait()
    with pytest.warns(RuntimeWarning, match="compiling kernels exited with code 3"):
        out = np.asarray(jf(X))
    np.testing.assert_allclose(out, eager(f, X), rtol=1e-6, atol=1e-6)
    assert comp._checked and all(k.signatures for k in comp._kernels)


def two_children(monkeypatch):
    """precompile.start splits even a 2-kernel program between two children."""
    monkeypatch.setattr(precompile, "CHILD_MIN_KERNELS", 1)
    monkeypatch.setattr(precompile, "usable_cpus", lambda: 2)


def test_kernels_compile_in_parallel_children_in_the_background(fresh_cache, monkeypatch):
    two_children(monkeypatch)
    f = two_kernel_program(4.5678)
    jf = fnad.jit(f)
    np.testing.assert_allclose(np.asarray(jf(X)), eager(f, X), rtol=1e-6, atol=1e-6)
    comp = jf.lower(X).compile().runtime_executable()
    assert len(comp._signatures) == 2 and len(comp._job.procs) == 2
    comp.wait()
    np.testing.assert_allclose(np.asarray(jf(X)), eager(f, X), rtol=1e-6, atol=1e-6)
    assert comp._checked and comp._job is None
    for kernel in comp._kernels:          # each loaded from its child's disk cache
        assert kernel.stats.cache_hits and not kernel.stats.cache_misses, kernel.stats


def test_the_foreground_compile_waits_for_parallel_children(fresh_cache, monkeypatch):
    two_children(monkeypatch)
    started = []
    start = precompile.start
    monkeypatch.setattr(precompile, "start", lambda *a: started.append(start(*a)) or started[-1])
    f = two_kernel_program(5.6789)
    jf = fnad.jit(f)
    with config.override(jax_background_compile=False):
        out = np.asarray(jf(X))
        comp = jf.lower(X).compile().runtime_executable()
    np.testing.assert_allclose(out, eager(f, X), rtol=1e-6, atol=1e-6)
    assert [len(job.procs) for job in started] == [2] and started[0].returncode == 0
    assert comp._checked and comp._job is None and comp._interp is None   # never interpreted
    for kernel in comp._kernels:
        assert kernel.stats.cache_hits and not kernel.stats.cache_misses, kernel.stats


def test_shares_split_kernels_by_cost():
    cost = {"a": 9, "b": 5, "c": 4, "d": 3, "e": 1}
    signatures = {n: {("int64",)} for n in cost} | {"b": {("int64",), ("tuple", 2)}}
    parts = precompile.shares(signatures, cost, 2)
    assert sorted(n for part in parts for n in part) == sorted(signatures)   # each once
    assert all(part[n] == signatures[n] for part in parts for n in part)
    loads = sorted(sum(cost[n] * len(part[n]) for n in part) for part in parts)
    assert loads == [13, 14]              # b counts twice: two signatures to compile
    assert len(precompile.shares({"a": {("int64",)}}, {"a": 1}, 3)) == 1   # no empty part


def test_a_job_is_running_until_every_child_is_done():
    def child(code: str):
        return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    waiting = child("import sys; sys.stdin.read(); raise SystemExit(5)")
    job = precompile.Job([child("raise SystemExit(0)"), waiting, child("raise SystemExit(0)")])
    job.procs[0].wait(timeout=60)
    assert job.poll() is None and job.returncode is None       # one child still runs
    waiting.stdin.close()
    assert job.wait(timeout=60) == 5 and job.poll() == 5        # its nonzero exit code
    ok = precompile.Job([child("pass"), child("pass")])
    assert ok.wait(timeout=60) == 0


def test_precompile_child_builds_the_recorded_types():
    from numba.core import types
    assert precompile._numba_type(("array", "float32", 2)) == types.Array(types.float32, 2, "C")
    assert precompile._numba_type(("tuple", 3)) == types.UniTuple(types.int64, 3)
    with pytest.raises(ValueError, match="unknown argument spec"):
        precompile._numba_type(("list", 1))
