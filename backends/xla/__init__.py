"""The `xla` backend: every primitive lowered to jax.lax, run eagerly or as whole programs.

Buffers are jax Arrays on jax's default device (a GPU where jax has one). Each family
module fills `impl_rules` with `eager(lowering)`: `lowering(*jax values, **params)` is a
plain function of jax values with the exact semantics of the numpy reference
(backends/numpy_ref), and `eager` runs it through one `jax.jit` per distinct params, so
an eager op costs one cached jax dispatch. `compile` (program.py) lowers a whole jaxpr,
control flow included, through the same lowerings (`impl.lower`) into one `jax.jit`.

64-bit types: jax has its own `jax_enable_x64` flag. Inside this backend jax's flag always
equals fnad's (`config.jax_enable_x64`): every call into jax runs under jax's x64 context
manager when the two differ, so fnad's flag decides the dtypes, and jax's global setting
(which a user may have set for their own jax code) is never changed.

Imports jax: fnad.backends loads this module on first use only.
"""
from __future__ import annotations

import functools

import numpy as np

try:
    import jax
except ImportError as e:  # pragma: no cover - exercised only without jax
    raise ImportError("the 'xla' backend needs jax: pip install 'fnad[xla]' "
                      "(or pip install jax)") from e

from fnad import dtypes
from fnad.config import config

name = "xla"
impl_rules: dict = {}

# ---- jax's x64 flag, mirrored from fnad's ------------------------------------------------
_x64_state = getattr(jax, "enable_x64", None)
if _x64_state is not None and hasattr(_x64_state, "value"):      # jax >= 0.6: a config State
    def jax_x64() -> bool:
        return _x64_state.value

    x64_scope = _x64_state                     # x64_scope(True): a context manager
else:  # pragma: no cover - older jax (jax-metal pins jax 0.4.x)
    from jax.experimental import disable_x64, enable_x64

    def jax_x64() -> bool:
        return bool(jax.config.x64_enabled)

    def x64_scope(on: bool):
        return enable_x64() if on else disable_x64()


def call_with_x64(x64: bool, fn, *args):
    """fn(*args) with jax's x64 flag set to `x64` (no context switch when it already is)."""
    if jax_x64() == x64:
        return fn(*args)
    with x64_scope(x64):
        return fn(*args)


# ---- eager implementations ------------------------------------------------------------------
def eager(lowering):
    """The eager impl of a lowering: jax.jit of it per distinct params, cached.

    The returned callable keeps the lowering as `.lower`, which `compile` traces inline,
    and its jitted functions, keyed by params, as `.jitted`."""
    jitted: dict = {}
    plain = jax.jit(lowering)

    def impl(*bufs, **params):
        if not params:
            fn = plain
        else:
            key = tuple(params.items())
            try:
                fn = jitted.get(key)
            except TypeError:                        # an unhashable param: run it unjitted
                fn = functools.partial(lowering, **params)
                key = None
            if fn is None:
                fn = jitted[key] = jax.jit(functools.partial(lowering, **params))
        x64 = config.jax_enable_x64
        if jax_x64() == x64:
            return fn(*bufs)
        with x64_scope(x64):
            return fn(*bufs)

    impl.lower = lowering
    impl.jitted = jitted
    impl.__name__ = getattr(lowering, "__name__", "impl")
    return impl


def lowering_of(impl):
    """The traceable jax function behind an impl_rules entry (a user's impl is its own)."""
    return getattr(impl, "lower", impl)


# ---- buffers ------------------------------------------------------------------------------
def device_put(value, device=None):
    """A NumPy value as a jax Array (64-bit dtypes kept when fnad's x64 is on)."""
    value = np.asarray(value)
    if value.dtype == dtypes.float0:           # tangents of integers: no data, jax has none
        return value
    return call_with_x64(config.jax_enable_x64, jax.device_put, value, device)


def to_numpy(buf) -> np.ndarray:
    return np.asarray(buf)


def block_until_ready(buf) -> None:
    ready = getattr(buf, "block_until_ready", None)
    if ready is not None:
        ready()


def devices() -> list:
    """The jax devices this backend runs on (jax's default platform)."""
    return jax.devices()


from fnad.backends.xla import (  # noqa: E402,F401
    convolution, cumulative, elementwise, indexing, linalg, logic, reductions, shape_ops, sorting,
    windowed)
from fnad.backends.xla import fft  # noqa: E402,F401
from fnad.backends.xla import ragged  # noqa: E402,F401
from fnad.backends.xla.program import compile  # noqa: E402,F401,A004
