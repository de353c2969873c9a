"""Fixtures shared by the test modules.

The numba backend's background compile (config.jax_background_compile) is off in the
suite: a test's first call of a jitted function must run the compiled kernels, not the
interpreter they are checked against. tests/test_background_compile.py turns it on.
"""
import pytest
from checks import x64_everywhere

from fnad.config import config

config.update("jax_background_compile", False)


@pytest.fixture
def x64():
    """x64 on in fnad and jax for the test, each restored afterwards."""
    with x64_everywhere():
        yield
