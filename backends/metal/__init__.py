"""The `metal` backend: the xla backend's lowerings run on jax-metal's `METAL` device
(the GPU of an Apple-silicon Mac).

jax-metal is Apple's PJRT plugin for jax. It works only on Apple-silicon Macs (macOS
Sonoma 14.4 or later) and only with old jax releases; its own compatibility table
(pypi.org/project/jax-metal) reads:

    jax-metal   macOS          jaxlib               jax
    0.1.1       Sonoma 14.4+   >= 0.4.34            == jaxlib
    0.1.0       Sonoma 14.4+   >= 0.4.26            >= 0.4.26
    0.0.7       Sonoma 14.4+   >= 0.4.26            >= 0.4.26

and jaxlib 0.5 and later fail to load it (jax issue #27146). Install with

    pip install jax-metal==0.1.1 jax==0.4.35 jaxlib==0.4.35

(a newer jaxlib only with ENABLE_PJRT_COMPATIBILITY=1, and without guarantees). Metal
has no float64 or complex types and no LAPACK decompositions, so those primitives fail
on this backend. Importing this module without a METAL device raises an ImportError
that says all this (fnad.backends then lists it as a backend without implementations).
"""
from __future__ import annotations

import platform
import sys

_NEEDS = ("the 'metal' backend runs fnad's xla lowerings on jax-metal's METAL device, and "
          "jax-metal works only on an Apple-silicon Mac (macOS Sonoma 14.4+) with an old "
          "jax: install jax-metal 0.1.1 with jax == jaxlib, >= 0.4.34 and < 0.5 "
          "(pip install jax-metal==0.1.1 jax==0.4.35 jaxlib==0.4.35; jax-metal 0.1.0 / "
          "0.0.7 need jax and jaxlib >= 0.4.26; jaxlib 0.5+ does not load it). ")


def _host() -> str:
    return f"{platform.system() or sys.platform} on {platform.machine() or 'unknown'}"


def _metal_device():
    """The METAL jax device, or an ImportError saying what is missing and what to install."""
    try:
        import jax
    except ImportError as e:
        raise ImportError(_NEEDS + f"jax is not installed here ({_host()}).") from e
    try:
        found = jax.devices("METAL")
    except (RuntimeError, ValueError) as e:             # no such platform registered
        raise ImportError(
            _NEEDS + f"This machine ({_host()}, jax {jax.__version__}) has no METAL "
            f"platform: {str(e).splitlines()[0] if str(e) else type(e).__name__}. Use the "
            "'xla' backend (jax on CPU/GPU) or 'numpy' / 'numba' here.") from e
    if not found:
        raise ImportError(_NEEDS + f"jax {jax.__version__} on {_host()} lists no METAL "
                          "device.")
    return found[0]


device = _metal_device()

from fnad.backends import xla  # noqa: E402

name = "metal"
# The xla backend's jitted impls: jax runs each where its operands live, on this device.
impl_rules: dict = dict(xla.impl_rules)
to_numpy = xla.to_numpy
block_until_ready = xla.block_until_ready


def device_put(value):
    """A NumPy value as a jax Array on the METAL device."""
    return xla.device_put(value, device)


def devices() -> list:
    return [device]


def compile(closed):  # noqa: A001
    """The xla backend's whole-program jax.jit, its constants placed on the METAL device."""
    return xla.compile(closed, device=device)

