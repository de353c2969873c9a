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


@pytest.fixture
def scratch_primitives():
    """Primitives a test defines leave the rule tables with it: their abstract-eval rules
    and their impls on the backends loaded by then (tests that list every primitive, such
    as test_every_first_order_primitive_has_an_xla_impl, see fnad's own only)."""
    from fnad import core
    from fnad.backends import _loaded
    before = set(core.abstract_eval_rules)
    yield
    for p in set(core.abstract_eval_rules) - before:
        del core.abstract_eval_rules[p]
        for backend in _loaded.values():
            backend.impl_rules.pop(p, None)
