"""Tests for fnad.config: JAX's option names, env vars, validation, override, listeners."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fnad.config import Config, UnknownOptionError, config

REPO = Path(__file__).resolve().parents[1]

DEFAULTS = {
    "jax_enable_x64": False,
    "jax_debug_nans": False,
    "jax_debug_infs": False,
    "jax_disable_jit": False,
    "jax_log_compiles": False,
    "jax_default_backend": "numpy",
    "jax_jit_backend": "numba",
    "jax_default_matmul_precision": None,
    "jax_numpy_rank_promotion": "allow",
    "jax_default_prng_impl": "threefry2x32",
    "jax_traceback_filtering": "auto",
    "jax_background_compile": True,
    "jax_eager_constant_folding": False,
    "jax_compilation_cache_dir": None,
    "jax_persistent_cache_min_compile_time_secs": 1.0,
    "jax_persistent_cache_min_entry_size_bytes": 0,
    "jax_numpy_dtype_promotion": "standard",
    "jax_threefry_partitionable": True,
    "jax_explain_cache_misses": False,
    "jax_check_tracer_leaks": False,
    "jax_enable_checks": False,
    "jax_hoist_scans": True,
}


@pytest.fixture
def fresh():
    """A Config built from an empty environment, so the caller's JAX_* vars do not leak in."""
    return Config(environ={})


def test_defaults_and_both_spellings(fresh):
    for name, value in DEFAULTS.items():
        assert getattr(fresh, name) == value
        assert getattr(fresh, name.removeprefix("jax_")) == value
    assert fresh.values() == tuple(DEFAULTS.items())  # fixed order, the defaults


def test_update_by_full_and_short_name(fresh):
    fresh.update("jax_enable_x64", True)
    assert fresh.jax_enable_x64 is True and fresh.enable_x64 is True
    fresh.update("enable_x64", False)
    assert fresh.jax_enable_x64 is False and fresh.enable_x64 is False
    fresh.update("numpy_rank_promotion", "raise")
    assert fresh.jax_numpy_rank_promotion == "raise"
    fresh.update("jax_default_matmul_precision", "highest")
    fresh.update("jax_default_matmul_precision", None)
    assert fresh.default_matmul_precision is None
    fresh.update("jax_debug_nans", 1)  # common in ported code; stored as a real bool
    assert fresh.jax_debug_nans is True


def test_values_track_updates_and_are_hashable(fresh):
    before = fresh.values()
    fresh.update("jax_disable_jit", True)
    after = fresh.values()
    assert before != after and dict(after)["jax_disable_jit"] is True
    assert [name for name, _ in after] == list(DEFAULTS)
    assert hash(after) != hash(before)


def test_global_config_is_a_config():
    assert isinstance(config, Config)
    assert config.jax_enable_x64 in (False, True)


@pytest.mark.parametrize("call", [
    lambda c: c.update("jax_enable_x46", True),
    lambda c: c.update("enable_x46", True),
    lambda c: c.enable_x46,
    lambda c: c.override(jax_enabel_x64=True).__enter__(),
])
def test_unknown_name_suggests_close_match(fresh, call):
    with pytest.raises(UnknownOptionError, match="enable_x64") as info:
        call(fresh)
    assert "Did you mean" in str(info.value)
    # Both: AttributeError for getattr/hasattr semantics, ValueError for a bad argument.
    assert isinstance(info.value, AttributeError) and isinstance(info.value, ValueError)


def test_hasattr_on_unknown_is_false(fresh):
    assert not hasattr(fresh, "no_such_option")
    assert getattr(fresh, "no_such_option", 7) == 7


@pytest.mark.parametrize("name, value", [
    ("jax_enable_x64", "False"),
    ("debug_nans", "yes"),
    ("jax_disable_jit", 2),
    ("jax_log_compiles", None),
    ("jax_default_backend", 3),
    ("jax_numpy_rank_promotion", True),
    ("jax_default_matmul_precision", 1.0),
])
def test_wrong_type_is_type_error_naming_option(fresh, name, value):
    before = fresh.values()
    full = name if name.startswith("jax_") else "jax_" + name
    with pytest.raises(TypeError, match=full):
        fresh.update(name, value)
    assert fresh.values() == before


@pytest.mark.parametrize("name, value", [
    ("jax_numpy_rank_promotion", "sometimes"),
    ("jax_default_prng_impl", "philox4x32"),
    ("jax_traceback_filtering", "everything"),
    ("jax_default_matmul_precision", "fastest"),
    ("jax_default_backend", ""),
])
def test_bad_choice_is_value_error_listing_choices(fresh, name, value):
    with pytest.raises(ValueError, match=name):
        fresh.update(name, value)


def test_assignment_is_refused(fresh):
    with pytest.raises(AttributeError, match="update"):
        fresh.jax_enable_x64 = True
    assert fresh.jax_enable_x64 is False


def test_override_sets_and_restores(fresh):
    with fresh.override(jax_enable_x64=True, debug_nans=True):
        assert fresh.jax_enable_x64 and fresh.enable_x64 and fresh.jax_debug_nans
    assert not fresh.jax_enable_x64 and not fresh.enable_x64 and not fresh.debug_nans


def test_override_restores_on_exception(fresh):
    fresh.update("jax_numpy_rank_promotion", "warn")
    with pytest.raises(RuntimeError, match="boom"), fresh.override(
        jax_numpy_rank_promotion="raise", jax_enable_x64=True
    ):
        assert fresh.numpy_rank_promotion == "raise"
        raise RuntimeError("boom")
    assert fresh.jax_numpy_rank_promotion == "warn"
    assert fresh.jax_enable_x64 is False


def test_override_nests(fresh):
    with fresh.override(jax_enable_x64=True):
        with fresh.override(enable_x64=False):
            assert fresh.jax_enable_x64 is False
        assert fresh.jax_enable_x64 is True
    assert fresh.jax_enable_x64 is False


def test_override_with_bad_argument_changes_nothing(fresh):
    before = fresh.values()
    with pytest.raises(TypeError, match="jax_debug_infs"), fresh.override(
        jax_enable_x64=True, jax_debug_infs="no"
    ):
        pass
    assert fresh.values() == before


def test_listener_called_after_update(fresh):
    seen = []

    @fresh.on_change
    def record(name, value):
        seen.append((name, value, fresh.jax_enable_x64))  # the new value is already visible

    fresh.update("enable_x64", True)
    assert seen == [("jax_enable_x64", True, True)]
    with fresh.override(jax_debug_nans=True):
        pass
    assert seen[1:] == [("jax_debug_nans", True, True), ("jax_debug_nans", False, True)]
    fresh.remove_listener(record)
    fresh.update("enable_x64", False)
    assert len(seen) == 3


def test_listener_not_called_for_rejected_update(fresh):
    seen = []
    fresh.on_change(lambda name, value: seen.append(name))
    with pytest.raises(TypeError):
        fresh.update("jax_enable_x64", "true")
    assert seen == []


def test_env_parsing_without_subprocess():
    cfg = Config(environ={"JAX_ENABLE_X64": "true", "FNAD_DEBUG_NANS": "1",
                          "JAX_NUMPY_RANK_PROMOTION": "raise",
                          "JAX_DEFAULT_MATMUL_PRECISION": "none"})
    assert cfg.jax_enable_x64 is True and cfg.jax_debug_nans is True
    assert cfg.jax_numpy_rank_promotion == "raise" and cfg.jax_default_matmul_precision is None
    # FNAD_* is the more specific name, so it wins over JAX_*.
    assert Config(environ={"JAX_ENABLE_X64": "1", "FNAD_ENABLE_X64": "0"}).enable_x64 is False
    with pytest.raises(ValueError, match="JAX_ENABLE_X64"):
        Config(environ={"JAX_ENABLE_X64": "maybe"})
    with pytest.raises(ValueError, match="FNAD_NUMPY_RANK_PROMOTION"):
        Config(environ={"FNAD_NUMPY_RANK_PROMOTION": "sometimes"})


def _read_in_subprocess(env_overrides, expr="config.jax_enable_x64"):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "FNAD_"))}
    env.update(env_overrides)
    # A bare `fnad` package keeps this a test of config.py, whatever fnad/__init__.py imports.
    code = (
        "import sys, types\n"
        f"pkg = types.ModuleType('fnad'); pkg.__path__ = [{str(REPO / 'fnad')!r}]\n"
        "sys.modules['fnad'] = pkg\n"
        "from fnad.config import config\n"
        f"print(repr({expr}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("env, want", [
    ({}, "False"),
    ({"JAX_ENABLE_X64": "1"}, "True"),
    ({"FNAD_ENABLE_X64": "1"}, "True"),
    ({"JAX_ENABLE_X64": "True", "FNAD_ENABLE_X64": "false"}, "False"),
])
def test_env_var_read_at_import(env, want):
    out = _read_in_subprocess(env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want


def test_env_var_for_string_option_and_bad_value():
    out = _read_in_subprocess({"JAX_DEFAULT_BACKEND": "numba"}, "config.default_backend")
    assert out.stdout.strip() == "'numba'", out.stderr
    out = _read_in_subprocess({"FNAD_DEBUG_NANS": "perhaps"})
    assert out.returncode != 0 and "FNAD_DEBUG_NANS" in out.stderr


def test_jax_context_managers():
    """fnad.debug_nans & co. as JAX's top-level context managers: set inside, restored after
    (also on error)."""
    import fnad
    cases = [(fnad.debug_nans, (), "jax_debug_nans", True),
             (fnad.debug_infs, (), "jax_debug_infs", True),
             (fnad.log_compiles, (), "jax_log_compiles", True),
             (fnad.default_matmul_precision, ("float32",), "jax_default_matmul_precision",
              "float32"),
             (fnad.numpy_rank_promotion, ("raise",), "jax_numpy_rank_promotion", "raise"),
             (fnad.numpy_dtype_promotion, ("strict",), "jax_numpy_dtype_promotion", "strict"),
             (fnad.threefry_partitionable, (False,), "jax_threefry_partitionable", False),
             (fnad.explain_cache_misses, (), "jax_explain_cache_misses", True),
             (fnad.check_tracer_leaks, (), "jax_check_tracer_leaks", True),
             (fnad.checking_leaks, (), "jax_check_tracer_leaks", True),
             (fnad.enable_checks, (), "jax_enable_checks", True)]
    for ctx, args, name, inside in cases:
        before = getattr(config, name)
        with ctx(*args):
            assert getattr(config, name) == inside, name
        assert getattr(config, name) == before, name
        with pytest.raises(RuntimeError):
            with ctx(*args):
                raise RuntimeError
        assert getattr(config, name) == before, name
    with pytest.raises(ValueError):
        fnad.numpy_rank_promotion("sometimes").__enter__()


def test_compilation_cache_options(fresh, monkeypatch, tmp_path):
    """jax_compilation_cache_dir picks the numba backend's cache dir when $FNAD_CACHE_DIR is
    unset (FNAD_CACHE_DIR wins); the persistent-cache thresholds are accepted, checked."""
    from fnad.backends.numba_cpu.codegen import cache_dir
    monkeypatch.delenv("FNAD_CACHE_DIR", raising=False)
    with config.override(jax_compilation_cache_dir=tmp_path / "jaxcache"):
        assert cache_dir() == tmp_path / "jaxcache" and (tmp_path / "jaxcache").is_dir()
        monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path / "fnadcache"))
        assert cache_dir() == tmp_path / "fnadcache"
    assert config.jax_compilation_cache_dir is None
    fresh.update("jax_persistent_cache_min_compile_time_secs", 0)
    fresh.update("persistent_cache_min_entry_size_bytes", -1 + 1)
    with pytest.raises(TypeError, match="non-negative number"):
        fresh.update("jax_persistent_cache_min_compile_time_secs", -2.0)
    with pytest.raises(ValueError, match="non-empty"):
        fresh.update("jax_compilation_cache_dir", "")
    env = Config({"JAX_COMPILATION_CACHE_DIR": "/x/y",
                  "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.5"})
    assert env.jax_compilation_cache_dir == "/x/y"
    assert env.jax_persistent_cache_min_compile_time_secs == 0.5


def test_explain_cache_misses_logs_retraces_naming_what_changed(caplog):
    """jax_explain_cache_misses: no message for a function's first trace, one naming the
    changed part of the key (the options, for a config change) for each later one."""
    import fnad
    import fnad.numpy as fnp
    f = fnad.jit(lambda x: x * 2)
    with fnad.explain_cache_misses(), caplog.at_level("WARNING", logger="fnad.jit"):
        f(fnp.ones(2))
        assert not caplog.records
        f(fnp.ones(3))
        f(fnp.ones(3))                                    # a hit: no message
        with fnad.numpy_dtype_promotion("strict"):
            f(fnp.ones(3))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "argument shapes/dtypes" in messages[0]
    assert "the config (jax_numpy_dtype_promotion)" in messages[1]


def test_single_process_functions_match_jax():
    import fnad
    jax = pytest.importorskip("jax", reason="jax not installed")
    for name in ("process_index", "process_count", "process_indices"):
        assert getattr(fnad, name)() == getattr(jax, name)(), name
    assert (fnad.host_id(), fnad.host_count(), fnad.host_ids()) == (0, 1, [0])
    assert all(isinstance(d, fnad.Device) for d in fnad.devices())


def test_compilation_cache_set_cache_dir(tmp_path, monkeypatch):
    """jax's `compilation_cache.set_cache_dir`: the numba backend keeps the next program it
    compiles there (unless $FNAD_CACHE_DIR, which comes first, is set: a warning)."""
    import numpy as np

    import fnad
    from fnad.experimental.compilation_cache import compilation_cache as cc
    before = config.jax_compilation_cache_dir
    monkeypatch.delenv("FNAD_CACHE_DIR", raising=False)
    try:
        cc.set_cache_dir(tmp_path / "cache")
        assert config.jax_compilation_cache_dir == str(tmp_path / "cache")
        f = fnad.jit(lambda x: fnad.numpy.tanh(x) * 3.0 + 0.25, backend="numba")
        np.testing.assert_allclose(f(np.arange(5.0, dtype=np.float32)),
                                   np.tanh(np.arange(5.0, dtype=np.float32)) * 3 + 0.25,
                                   rtol=1e-6)
        assert any((tmp_path / "cache").iterdir())              # the program, its kernels
        cc.reset_cache()                                        # files and option stay
        assert config.jax_compilation_cache_dir == str(tmp_path / "cache")
        monkeypatch.setenv("FNAD_CACHE_DIR", str(tmp_path / "env"))
        with pytest.warns(RuntimeWarning, match="FNAD_CACHE_DIR.*takes precedence"):
            cc.set_cache_dir(str(tmp_path / "other"))
        with pytest.raises(TypeError, match="expected a directory path"):
            cc.set_cache_dir(None)
    finally:
        config.update("jax_compilation_cache_dir", before)
