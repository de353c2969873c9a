"""fnad.primitives: the primitive set, one module per family.

Importing this package registers every built-in primitive's rules. The
families: elementwise (arithmetic, transcendental, complex parts), logic
(comparisons, bitwise, select_n, convert_element_type, stop_gradient),
reductions, shape_ops.
"""
from fnad.primitives import elementwise, logic, reductions, shape_ops  # noqa: F401
