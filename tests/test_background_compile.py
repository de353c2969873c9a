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

X = np.random.default_rng(0).standard_normal((4, 33)).astype(np.float32)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codegen, "STRICT", True)
    with config.override(jax_background_compile=True):
        yield tmp_path


def program(c: float):
    def f(x):      # two kernels: an elementwise chain and a row sum with a broadcast
        y = jnp.tanh(x * c + 0.5) * x
        return y - jnp.sum(y, axis=1, keepdims=True) / c
    return f


def eager(f, x):
    return np.asarray(f(jnp.asarray(x)))


def test_runs_interpreted_then_loads_what_the_child_compiled(fresh_cache):
    f = program(1.2345)
    jf = fnad.jit(f)
    first = np.asarray(jf(X))
    comp = jf.lower(X).compile()
    np.testing.assert_allclose(first, eager(f, X), rtol=1e-6, atol=1e-6)
    assert comp._signatures, "the code generator recorded no kernel signatures"
    comp.wait()
    assert not comp.compiling
    assert precompile.markers_present(fresh_cache, comp._signatures)
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
    comp = fnad.jit(f).lower(X).compile()
    assert comp._signatures
    proc = precompile.start(fresh_cache, comp._signatures)
    assert proc.wait(timeout=300) == 0
    assert precompile.markers_present(fresh_cache, comp._signatures)


def test_compiles_in_the_foreground_when_off(fresh_cache):
    f = program(2.3456)
    jf = fnad.jit(f)
    with config.override(jax_background_compile=False):
        out = np.asarray(jf(X))
        comp = jf.lower(X).compile()
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
    comp = jf.lower(X).compile()
    comp.wait()
    with pytest.warns(RuntimeWarning, match="background compile exited with code 3"):
        out = np.asarray(jf(X))
    np.testing.assert_allclose(out, eager(f, X), rtol=1e-6, atol=1e-6)
    assert comp._checked and all(k.signatures for k in comp._kernels)


def test_precompile_child_builds_the_recorded_types():
    from numba.core import types
    assert precompile._numba_type(("array", "float32", 2)) == types.Array(types.float32, 2, "C")
    assert precompile._numba_type(("tuple", 3)) == types.UniTuple(types.int64, 3)
    with pytest.raises(ValueError, match="unknown argument spec"):
        precompile._numba_type(("list", 1))
