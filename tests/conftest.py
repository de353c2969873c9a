"""Fixtures shared by the test modules.

The numba backend's background compile (config.jax_background_compile) is off in the
suite: a test's first call of a jitted function must run the compiled kernels, not the
interpreter they are checked against. tests/test_background_compile.py turns it on.

A cold program's llvm kernels are compiled in the test's process alone (FNAD_LLVM_HELPER=0:
no helper process; tests/test_llvm_kernels.py tests the helper).

`numba_compiler`: the numba backend's kernels compiled by numba instead of the default llvm
kernel compiler (backends/numba_cpu/llvm_kernels.py), in this process and in the child
processes a test starts, for the tests of numba's own compile path.

XLA's CPU compiler is the suite's largest cost: most tests check fnad against a jax.jit of
the same function, ~2000 small programs a module, ~45 ms each on a slow machine. The suite
compiles them with XLA's older loop emitters (`--xla_cpu_use_fusion_emitters=false`, a third
faster to compile) and without LLVM's optimizations (`--xla_backend_optimization_level=0`,
the suite in about 0.75 of the time). Unoptimized code computes the same functions, but not
always to the same last bit, and a sampler's accept/reject test can turn on that bit (the
poisson sampler drew 7 and 622 where jax's default code draws 9 and 565): oracles
compared bit for bit or to 1e-9 compile at XLA's default level through
`checks.jax_at_default_level`. FNAD_TEST_XLA_DEFAULTS=1 runs the suite with jax's own
settings (it passes under both).
"""
import os
from importlib import metadata

import pytest
from checks import x64_everywhere

from fnad.config import config


def _jaxlib_version() -> tuple:
    try:
        return tuple(int(p) for p in metadata.version("jaxlib").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return ()


# set before jax makes its CPU client, which reads XLA_FLAGS once; jaxlib before 0.8 has no
# fusion-emitter flag (and aborts on an unknown one); flags the caller set are kept
_SUITE_XLA_FLAGS = {"xla_cpu_use_fusion_emitters": "false", "xla_backend_optimization_level": "0"}
if os.environ.get("FNAD_TEST_XLA_DEFAULTS") != "1" and _jaxlib_version() >= (0, 8):
    _given = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = " ".join(
        [_given] + [f"--{k}={v}" for k, v in _SUITE_XLA_FLAGS.items() if k not in _given]
    ).strip()

config.update("jax_background_compile", False)
# the llvm kernel compiler's helper process (llvm_kernels.compile_ahead) shortens a program's
# cold first call where a CPU is free; under xdist none is, so the suite starts none (its
# own tests in test_llvm_kernels.py do)
os.environ.setdefault("FNAD_LLVM_HELPER", "0")


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


@pytest.fixture
def numba_compiler(monkeypatch):
    """Kernels compiled by numba (FNAD_KERNEL_COMPILER=numba) for the test."""
    from fnad.backends.numba_cpu import llvm_kernels
    monkeypatch.setattr(llvm_kernels, "ENABLED", False)
    monkeypatch.setenv("FNAD_KERNEL_COMPILER", "numba")
