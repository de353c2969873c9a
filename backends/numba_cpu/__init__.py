"""The `numba` backend: the default for jit on a CPU.

Buffers are NumPy arrays, so eager execution uses the NumPy reference
implementations (a copy of their table: primitives registered for `numba` alone
stay here). `compile(closed)` turns a whole jaxpr into one generated Python
module compiled with numba (codegen.py). Importing this package does not import
numba; compiling does.
"""
from __future__ import annotations

from fnad.backends import numpy_ref as _ref

name = "numba"
impl_rules: dict = dict(_ref.impl_rules)
device_put = _ref.device_put
to_numpy = _ref.to_numpy
block_until_ready = _ref.block_until_ready
eager_backend = _ref          # jit's outputs are numpy-backend Arrays: the same buffers


def compile(closed):
    from fnad.backends.numba_cpu.codegen import compile_jaxpr
    return compile_jaxpr(closed)
