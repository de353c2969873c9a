"""The `numba` backend: the default for jit on a CPU.

Buffers are NumPy arrays, so eager execution uses the NumPy reference
implementations (a ChainMap over their table: primitives registered for `numba` alone
stay here, and one registered later for `numpy` alone is found too), except dot_general,
which splits large products into chunks run by the backend's threads (gemm.py; so do
ragged_dot_general's per-group products), and
conv_general_dilated, whose patches a numba kernel writes on those threads (conv.py).
`compile(closed)` turns a whole jaxpr into one generated Python module compiled with
numba (codegen.py); `load_traced(traced)` finds such a program on disk by the jaxpr jit
traced, before jit's passes, so that a new process need not run them. Importing this
package does not import numba; compiling does.
"""
from __future__ import annotations

import collections

from fnad.backends import numpy_ref as _ref

name = "numba"
impl_rules = collections.ChainMap({}, _ref.impl_rules)
device_put = _ref.device_put
to_numpy = _ref.to_numpy
block_until_ready = _ref.block_until_ready
eager_backend = _ref          # jit's outputs are numpy-backend Arrays: the same buffers


def _dot_general(lhs, rhs, **params):
    """BLAS in chunks that threads claim (gemm.py; imported on first use: it imports numba)."""
    from fnad.backends.numba_cpu.gemm import dot_general
    return dot_general(lhs, rhs, **params)


def _conv_general_dilated(lhs, rhs, **params):
    """im2col by a numba kernel on the backend's threads, GEMMs as dot_general's (conv.py;
    imported on first use)."""
    from fnad.backends.numba_cpu.conv import conv_general_dilated
    return conv_general_dilated(lhs, rhs, **params)


def _ragged_dot_general(lhs, rhs, group_sizes, **params):
    """The numpy reference's loop over groups, each product through gemm.matmul."""
    from fnad.backends.numba_cpu.gemm import matmul
    from fnad.backends.numpy_ref.ragged import ragged_dot_general
    return ragged_dot_general(lhs, rhs, group_sizes, matmul=matmul, **params)


def _register() -> None:
    from fnad.primitives.convolution import conv_general_dilated_p
    from fnad.primitives.linalg import dot_general_p
    from fnad.primitives.ragged import ragged_dot_general_p
    impl_rules[dot_general_p] = _dot_general
    impl_rules[conv_general_dilated_p] = _conv_general_dilated
    impl_rules[ragged_dot_general_p] = _ragged_dot_general


_register()


def compile(closed):
    from fnad.backends.numba_cpu.codegen import compile_jaxpr
    return compile_jaxpr(closed)


def load_traced(traced):
    """The program compiled before for the jaxpr jit traced (before its passes), read back
    from the disk cache, or None (codegen.load_traced)."""
    from fnad.backends.numba_cpu.codegen import load_traced
    return load_traced(traced)


def remember_traced(traced, compiled) -> None:
    """Note on disk that `traced` compiles to `compiled` (codegen.remember_traced)."""
    from fnad.backends.numba_cpu.codegen import remember_traced
    remember_traced(traced, compiled)
