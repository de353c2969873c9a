"""fnad's global configuration: the one ``config`` object, under JAX's option names.

Owns the option table, the values read from ``JAX_*`` / ``FNAD_*`` environment variables at
import, validation of updates, ``override`` and change listeners. Ported JAX code runs
unchanged: ``config.update("jax_enable_x64", True)`` and ``config.jax_enable_x64`` work, and
so do the names without the ``jax_`` prefix.

Must not import anything from fnad (everything else imports this) nor anything slow: it is
imported on every ``import fnad``.

Values live as plain instance attributes because ``config.jax_enable_x64`` is read on every
dtype canonicalization; a ``__getattr__`` or property lookup there would be measurable.
The state is process-global, not thread-local as JAX's context managers are.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

__all__ = ["Config", "UnknownOptionError", "config", "disable_jit"]


_state_ids: dict[tuple, int] = {}


class UnknownOptionError(AttributeError, ValueError):
    """An option name fnad does not know.

    Both an AttributeError (JAX raises one, and ``hasattr``/``getattr`` with a default rely on
    it) and a ValueError (what a bad argument to ``update`` is)."""


class _Option(NamedTuple):
    default: Any
    kind: str  # "bool" | "str" | "enum" | "optional_enum" | "optional_path" | "number"
    choices: tuple[str, ...] = ()
    help: str = ""


# JAX's legacy precision names plus its dot-algorithm presets, accepted so that ported code
# which sets them keeps running. The xla backend passes the setting to XLA (unset, it asks
# for full float32 precision); numpy and numba multiply float32 in float32 whatever it says.
_MATMUL_PRECISIONS = (
    "default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
    "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY",
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM", "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16",
    "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
    "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64",
)

# The definition order here is the order of ``config.values()``, which ends up in jit cache
# keys: append new options at the end rather than reordering.
_OPTIONS: dict[str, _Option] = {
    "jax_enable_x64": _Option(False, "bool", help="64-bit types; off means 64-bit -> 32-bit"),
    "jax_debug_nans": _Option(False, "bool", help="raise when an op produces a NaN"),
    "jax_debug_infs": _Option(False, "bool", help="raise when an op produces an inf"),
    "jax_disable_jit": _Option(False, "bool", help="run jitted functions eagerly"),
    "jax_log_compiles": _Option(False, "bool", help="log each jit compilation"),
    "jax_default_backend": _Option("numpy", "str", help="backend for eager execution"),
    "jax_jit_backend": _Option("numba", "str", help="fnad-only: default backend for jit"),
    "jax_default_matmul_precision": _Option(
        None, "optional_enum", _MATMUL_PRECISIONS, help="float32 products on xla (JAX's names)"
    ),
    "jax_numpy_rank_promotion": _Option(
        "allow", "enum", ("allow", "warn", "raise"), help="implicit rank broadcasting"
    ),
    # the implementations fnad.random has (fnad/_prng_impls.py); JAX's philox and
    # threefry4x32 are refused rather than silently ignored
    "jax_default_prng_impl": _Option(
        "threefry2x32", "enum", ("threefry2x32", "rbg", "unsafe_rbg"),
        help="the PRNG of raw keys and of fnad.random.key without impl="
    ),
    "jax_traceback_filtering": _Option(
        "auto",
        "enum",
        ("off", "tracebackhide", "remove_frames", "quiet_remove_frames", "auto"),
        help="accepted for JAX compatibility",
    ),
    "jax_background_compile": _Option(
        True, "bool", help="fnad-only: with FNAD_KERNEL_COMPILER=numba, the numba backend "
        "runs a new program interpreted while its kernels compile in child processes (the "
        "default llvm kernel compiler compiles in the foreground)"
    ),
    "jax_eager_constant_folding": _Option(
        False, "bool", help="while tracing, evaluate operations on concrete values at once "
        "(fnad.ensure_compile_time_eval sets it)"
    ),
    "jax_compilation_cache_dir": _Option(
        None, "optional_path", help="where the numba backend keeps compiled programs when "
        "$FNAD_CACHE_DIR is not set (default ~/.cache/fnad/numba)"
    ),
    "jax_persistent_cache_min_compile_time_secs": _Option(
        1.0, "number", help="accepted for JAX compatibility: fnad keeps every program"
    ),
    "jax_persistent_cache_min_entry_size_bytes": _Option(
        0, "number", help="accepted for JAX compatibility: fnad keeps every program"
    ),
    "jax_numpy_dtype_promotion": _Option(
        "standard", "enum", ("standard", "strict"), help="implicit dtype promotion: JAX's "
        "lattice, or 'strict' (only Python scalars promote, to an array's type of their kind)"
    ),
    "jax_threefry_partitionable": _Option(
        True, "bool", help="fnad.random's bit layout: counters as the flat index split into "
        "hi/lo words (jax 0.10's default); False gives jax's original layout"
    ),
    "jax_explain_cache_misses": _Option(
        False, "bool", help="log (a warning) why a jitted function traces again: which part "
        "of its cache key changed since its last compile"
    ),
    "jax_check_tracer_leaks": _Option(
        False, "bool", help="accepted for JAX compatibility: fnad raises "
        "UnexpectedTracerError whenever an escaped tracer is used, set or not; it does not "
        "look for leaked tracers when a trace ends, as jax does"
    ),
    "jax_enable_checks": _Option(
        False, "bool", help="accepted for JAX compatibility (jax's internal checks)"
    ),
    "jax_hoist_scans": _Option(
        True, "bool", help="fnad-only: jit runs a scan's products of consts and xs, and its "
        "array ops of the xs, before the loop for all steps, and sums per-step products into a "
        "carry after it, by one product (fnad/passes/scan_hoist.py); False keeps loops as "
        "written (no stacked arrays; sums in eager's order)"
    ),
}

# Short names (without "jax_") resolve to the full ones; both are stored as attributes.
_ALIASES: dict[str, str] = {name[len("jax_"):]: name for name in _OPTIONS}

_TRUE_STRINGS = frozenset({"1", "y", "yes", "t", "true", "on"})
_FALSE_STRINGS = frozenset({"0", "n", "no", "f", "false", "off"})


def _resolve(name: str) -> str:
    """Full ``jax_*`` name for ``name``; an UnknownOptionError with close matches if none."""
    if name in _OPTIONS:
        return name
    full = _ALIASES.get(name)
    if full is not None:
        return full
    import difflib  # only on this error path: it costs ~1.5 ms of every `import fnad`

    known = [*_OPTIONS, *_ALIASES]
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownOptionError(
        f"Unknown fnad config option {name!r}.{hint} Known options: {', '.join(_OPTIONS)}."
    )


def _validate(name: str, value: Any) -> Any:
    """The value to store for option ``name``, or a TypeError/ValueError naming the option."""
    opt = _OPTIONS[name]
    if opt.kind == "bool":
        # 0 and 1 pass because `config.update("jax_enable_x64", 1)` is common in the wild;
        # anything else (notably the string "False", which is truthy) is a mistake.
        if isinstance(value, bool) or (type(value) is int and value in (0, 1)):
            return bool(value)
        if type(value).__name__ == "bool_":  # numpy bool, without importing numpy here
            return bool(value)
        raise TypeError(
            f"Config option {name!r} takes a bool, got {type(value).__name__} {value!r}."
        )
    if opt.kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TypeError(f"Config option {name!r} takes a non-negative number, got "
                            f"{type(value).__name__} {value!r}.")
        return value
    if opt.kind in ("optional_enum", "optional_path") and value is None:
        return None
    if opt.kind == "optional_path" and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        expected = {"optional_enum": "a str or None",
                    "optional_path": "a path (str or os.PathLike) or None"}.get(opt.kind,
                                                                                "a str")
        raise TypeError(
            f"Config option {name!r} takes {expected}, got {type(value).__name__} {value!r}."
        )
    if opt.kind in ("enum", "optional_enum") and value not in opt.choices:
        raise ValueError(
            f"Config option {name!r} must be one of {', '.join(map(repr, opt.choices))}"
            f"{' or None' if opt.kind == 'optional_enum' else ''}; got {value!r}."
        )
    if opt.kind in ("str", "optional_path") and not value:
        raise ValueError(f"Config option {name!r} must be a non-empty string.")
    return value


def _from_env(name: str, environ: Any) -> Any:
    """Value of ``name`` from FNAD_<NAME> (wins) or JAX_<NAME>, else the default."""
    short = name[len("jax_"):].upper()
    for var in (f"FNAD_{short}", f"JAX_{short}"):
        raw = environ.get(var)
        if raw is None:
            continue
        kind = _OPTIONS[name].kind
        if kind == "bool":
            low = raw.strip().lower()
            if low in _TRUE_STRINGS:
                return True
            if low in _FALSE_STRINGS:
                return False
            raise ValueError(
                f"Environment variable {var}={raw!r} is not a truth value "
                f"(use one of {sorted(_TRUE_STRINGS | _FALSE_STRINGS)})."
            )
        if kind in ("optional_enum", "optional_path") and raw.strip().lower() in ("",
                                                                                 "none"):
            return None
        if kind == "number":
            try:
                return _validate(name, float(raw))
            except (TypeError, ValueError):
                raise ValueError(f"Environment variable {var}={raw!r} is not a non-negative "
                                 "number") from None
        try:
            return _validate(name, raw.strip())
        except (TypeError, ValueError) as err:
            raise ValueError(f"Environment variable {var}: {err}") from None
    return _OPTIONS[name].default


class Config:
    """fnad's options, readable as attributes under JAX's names (with or without ``jax_``).

    Change them with ``update`` or temporarily with ``override``; plain attribute assignment
    is refused because it would skip validation and the listeners.
    """

    def __init__(self, environ: Any = None) -> None:
        env = os.environ if environ is None else environ
        d = self.__dict__
        d["_listeners"] = []
        for name in _OPTIONS:
            value = _from_env(name, env)
            d[name] = value
            d[name[len("jax_"):]] = value
        d["_values"] = tuple((name, d[name]) for name in _OPTIONS)
        d["_state_id"] = _state_ids.setdefault(d["_values"], len(_state_ids))

    def update(self, name: str, value: Any) -> None:
        """Set option ``name`` (``"jax_enable_x64"`` or ``"enable_x64"``) to ``value``.

        Raises UnknownOptionError (an AttributeError and ValueError) for an unknown name,
        TypeError for a value of the wrong type, ValueError for a value outside the choices.
        Listeners registered with ``on_change`` are then called with (full name, value).
        """
        full = _resolve(name)
        value = _validate(full, value)
        self._set(full, value)
        for callback in tuple(self._listeners):
            callback(full, value)

    def _set(self, full: str, value: Any) -> None:
        d = self.__dict__
        d[full] = value
        d[full[len("jax_"):]] = value
        d["_values"] = tuple((name, d[name]) for name in _OPTIONS)
        # a small int naming this combination of values: a cheap key for jit's fast path
        d["_state_id"] = _state_ids.setdefault(d["_values"], len(_state_ids))

    @contextlib.contextmanager
    def override(self, **kwargs: Any) -> Iterator[None]:
        """Set options for the duration of a ``with`` block, restoring them even on error.

        ``with config.override(jax_enable_x64=True): ...``. Every name and value is checked
        before any is set, so a bad argument leaves the config untouched.
        """
        changes = [(_resolve(name), value) for name, value in kwargs.items()]
        for full, value in changes:
            _validate(full, value)
        saved = [(full, self.__dict__[full]) for full, _ in changes]
        try:
            for full, value in changes:
                self.update(full, value)
            yield
        finally:
            for full, old in reversed(saved):
                self.update(full, old)

    def values(self) -> tuple[tuple[str, Any], ...]:
        """All (full name, value) pairs in a fixed order: hashable, for jit cache keys."""
        return self._values

    def on_change(self, callback: Callable[[str, Any], None]) -> Callable[[str, Any], None]:
        """Call ``callback(full_name, value)`` after every ``update`` (and override enter/exit).

        Returns ``callback`` so it can be used as a decorator. Exceptions from a callback
        propagate to the caller of ``update``, after the value has been set.
        """
        self._listeners.append(callback)
        return callback

    def remove_listener(self, callback: Callable[[str, Any], None]) -> None:
        """Stop calling ``callback`` on changes (a no-op if it was not registered)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails, so known options never get here.
        if name.startswith("__"):  # copy/pickle/IPython probes: no difflib work for those
            raise AttributeError(name)
        _resolve(name)
        raise AttributeError(name)  # unreachable: every known name is in __dict__

    def __setattr__(self, name: str, value: Any) -> None:
        hint = f"config.update({name!r}, {value!r})"
        raise AttributeError(f"Set fnad config options with {hint}, not by assignment.")

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={value!r}" for name, value in self._values)
        return f"Config({body})"


config = Config()


def disable_jit(disable: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager (or decorator) setting ``jax_disable_jit`` for a block, as
    ``jax.disable_jit``: inside it, ``fnad.jit``-wrapped functions run op by op (eagerly),
    so prints, breakpoints and ``debug_nans`` see concrete values. Restored on exit, also
    on error; nests. ``disable_jit(False)`` re-enables jit inside an outer block. Like the
    rest of the config it is process-global, not thread-local as in JAX.
    """
    return config.override(jax_disable_jit=disable)


def debug_nans(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_debug_nans`` for a block, as ``jax.debug_nans``."""
    return config.override(jax_debug_nans=new_val)


def debug_infs(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_debug_infs`` for a block, as ``jax.debug_infs``."""
    return config.override(jax_debug_infs=new_val)


def log_compiles(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_log_compiles`` for a block, as ``jax.log_compiles``."""
    return config.override(jax_log_compiles=new_val)


def default_matmul_precision(new_val) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_default_matmul_precision`` for a block, as
    ``jax.default_matmul_precision``."""
    return config.override(jax_default_matmul_precision=new_val)


def numpy_rank_promotion(new_val: str) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_numpy_rank_promotion`` for a block, as
    ``jax.numpy_rank_promotion``."""
    return config.override(jax_numpy_rank_promotion=new_val)


def numpy_dtype_promotion(new_val: str) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_numpy_dtype_promotion`` for a block, as
    ``jax.numpy_dtype_promotion``: ``"strict"`` makes every implicit promotion between
    different dtypes a TypePromotionError, except a Python scalar (weakly typed) meeting an
    array of its kind or a wider one (``float32 array + 1.0``, ``int8 array + 1``,
    ``float32 array + 1``)."""
    return config.override(jax_numpy_dtype_promotion=new_val)


def threefry_partitionable(new_val: bool) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_threefry_partitionable`` for a block, as
    ``jax.threefry_partitionable``: False draws fnad.random's bits in jax's original
    layout (the numbers older jax releases gave for the same key)."""
    return config.override(jax_threefry_partitionable=new_val)


def explain_cache_misses(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_explain_cache_misses`` for a block, as
    ``jax.explain_cache_misses``."""
    return config.override(jax_explain_cache_misses=new_val)


def check_tracer_leaks(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_check_tracer_leaks`` for a block, as
    ``jax.check_tracer_leaks`` (accepted; see the option's help: fnad checks tracers where
    they are used, always)."""
    return config.override(jax_check_tracer_leaks=new_val)


checking_leaks = check_tracer_leaks


def enable_checks(new_val: bool = True) -> contextlib.AbstractContextManager[None]:
    """Context manager setting ``jax_enable_checks`` for a block (accepted, as
    ``jax.enable_checks``)."""
    return config.override(jax_enable_checks=new_val)
