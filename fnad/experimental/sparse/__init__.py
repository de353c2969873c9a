"""fnad.experimental.sparse: the BCOO (batched coordinate) sparse array of
jax.experimental.sparse and its core operations, composed from fnad.numpy / fnad.lax
operations (no new primitives), so grad (through the stored data and dense operands), vmap
and jit work on them.

`sparsify` runs a dense-array function on BCOO arguments (transform.py).

BCSR (bcsr.py) converts to and from dense arrays and BCOO; its products go through BCOO.

The shape operations (slice, dynamic_slice, rev, squeeze, reshape, broadcast_in_dim,
concatenate) and update_layout are in _structure.py; grad, value_and_grad, jacfwd, jacrev
and jacobian that differentiate sparse arguments through their data in ad.py.

Not here (jax has them): COO / CSR / CSC, bcoo_spdot_general (sparse x sparse products),
bcoo_gather, bcoo_dot_general_sampled, bcoo_conv_general_dilated, the bcsr_* operations
other than conversions, sparse.linalg and comparisons.
"""
from fnad.experimental.sparse._products import (bcoo_dot_general, bcoo_multiply_dense,
                                                bcoo_multiply_sparse)
from fnad.experimental.sparse.bcoo import (BCOO, bcoo_eliminate_zeros, bcoo_extract,
                                           bcoo_fromdense, bcoo_reduce_sum, bcoo_sort_indices,
                                           bcoo_sum_duplicates, bcoo_todense, bcoo_transpose,
                                           empty, eye, todense)
from fnad.experimental.sparse._structure import (SparseEfficiencyError,
                                                 SparseEfficiencyWarning,
                                                 bcoo_broadcast_in_dim, bcoo_concatenate,
                                                 bcoo_dynamic_slice, bcoo_reshape, bcoo_rev,
                                                 bcoo_slice, bcoo_squeeze, bcoo_update_layout)
from fnad.experimental.sparse.ad import grad, jacfwd, jacobian, jacrev, value_and_grad
from fnad.experimental.sparse.random import random_bcoo
from fnad.experimental.sparse.bcsr import BCSR, bcsr_fromdense, bcsr_todense
from fnad.experimental.sparse.transform import sparsify

__all__ = ["BCOO", "BCSR", "SparseEfficiencyError", "SparseEfficiencyWarning",
           "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_dynamic_slice", "bcoo_reshape",
           "bcoo_rev", "bcoo_slice", "bcoo_squeeze", "bcoo_update_layout", "grad", "jacfwd",
           "jacobian", "jacrev", "random_bcoo", "value_and_grad", "bcoo_dot_general",
           "bcoo_eliminate_zeros", "bcoo_extract",
           "bcoo_fromdense", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum",
           "bcoo_sort_indices", "bcoo_sum_duplicates", "bcoo_todense", "bcoo_transpose", "empty",
           "bcsr_fromdense", "bcsr_todense", "eye", "sparsify", "todense"]
