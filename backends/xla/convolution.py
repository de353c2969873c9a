"""XLA lowering of conv_general_dilated: jax.lax.conv_general_dilated with the same params.

Operands are converted to the result dtype first, float16/bfloat16 accumulated in float32,
and float32 runs at Precision.HIGHEST unless a precision is given, as dot_general
(linalg.py): the numpy reference computes in full float32. Booleans go through int32.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.backends.xla.linalg import _compute_dtype, _precision
from fnad.primitives import convolution as cv
from fnad.primitives.linalg import dot_general_result_dtype


def _conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, feature_group_count, batch_group_count, precision,
                          preferred_element_type):
    out_dtype = dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if out_dtype == np.bool_:                          # logical: any(a and b), via int32
        cdt = np.dtype(np.int32)
    out = lax.conv_general_dilated(
        lax.convert_element_type(lhs, cdt), lax.convert_element_type(rhs, cdt),
        window_strides, padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
        dimension_numbers=lax.ConvDimensionNumbers(*dimension_numbers),
        feature_group_count=feature_group_count, batch_group_count=batch_group_count,
        precision=_precision(precision))
    if out_dtype == np.bool_:
        return lax.ne(out, lax.full_like(out, 0))
    return lax.convert_element_type(out, out_dtype)


impl_rules[cv.conv_general_dilated_p] = eager(_conv_general_dilated)
