"""fnad.primitives: the primitive set, one module per family.

Importing this package registers every built-in primitive's rules. The
families: elementwise (arithmetic, transcendental, complex parts), logic
(comparisons, bitwise, select_n, convert_element_type, stop_gradient),
reductions (reduce_*, argmax/argmin), cumulative (cumsum, cumprod, cummax...),
shape_ops (broadcast, reshape, slicing, padding, iota), linalg (dot_general),
convolution (conv_general_dilated), decompositions (cholesky, triangular_solve, lu, qr,
geqrf, eigh, svd, eig),
fft (fft: FFT, IFFT, RFFT, IRFFT),
indexing (gather and the scatters), ragged (ragged_dot_general: grouped products),
sorting (sort, top_k), windowed (reduce_window_sum, _max, _min: pooling), control_flow
(cond, scan, while: the higher-order primitives, whose params hold sub-jaxprs).
"""
from fnad.primitives import (convolution, cumulative, decompositions,  # noqa: F401
                             elementwise, indexing, linalg, logic, reductions, shape_ops,
                             sorting, windowed)
from fnad.primitives import control_flow  # noqa: F401,E402
from fnad.primitives import fft  # noqa: F401,E402
from fnad.primitives import ragged  # noqa: F401,E402
# The public API for user primitives: declare one, then its rules with the def_* methods
# (def_abstract_eval, def_impl(fn, backend=...), def_jvp or def_vjp, def_transpose,
# def_batch); see tests/test_user_primitives.py.
from fnad.core import Primitive, ShapedArray  # noqa: E402,F401
