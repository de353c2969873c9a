"""fnad.experimental.sparse: the sparse arrays of jax.experimental.sparse and their core
operations, composed from fnad.numpy / fnad.lax operations (no new primitives), so grad
(through the stored data and dense operands), vmap and jit work on them.

BCOO (bcoo.py) is the main format: any number of batch, sparse and dense dims, products
with dense arrays and other BCOO arrays (_products.py), shape operations, update_layout
and bcoo_gather (_structure.py), and `sparsify`, which runs a dense-array function on BCOO
arguments (transform.py).

BCSR (bcsr.py) converts to and from dense arrays and BCOO; its products and the bcsr_*
operations go through BCOO. COO (coo.py) and CSR / CSC (csr.py) are jax's plain 2-D
formats: conversions and products with dense vectors and matrices. All of them derive from
JAXSparse (_base.py). `sparse.linalg.spsolve` solves a CSR system (densely).

grad, value_and_grad, jacfwd, jacrev and jacobian that differentiate sparse arguments
through their data are in ad.py.

bcoo_conv_general_dilated (_conv.py) convolves BCOO and dense operands into a BCOO, with
all of lax.conv_general_dilated's options (jax: 1-D, unit strides, no groups only).
`sparse.linalg.lobpcg_standard` finds the top eigenpairs of a symmetric operator.

Not here (jax has them): comparisons, SparseTracer, the `api` / `util` modules and the
primitive objects (`*_p`) of jax's sparse operations (fnad's are compositions).
"""
from fnad.experimental.sparse._products import (bcoo_dot_general, bcoo_dot_general_sampled,
                                                bcoo_multiply_dense, bcoo_multiply_sparse,
                                                bcoo_spdot_general)
from fnad.experimental.sparse.bcoo import (BCOO, bcoo_eliminate_zeros, bcoo_extract,
                                           bcoo_fromdense, bcoo_reduce_sum, bcoo_sort_indices,
                                           bcoo_sum_duplicates, bcoo_todense, bcoo_transpose,
                                           empty, eye, todense)
from fnad.experimental.sparse._conv import bcoo_conv_general_dilated
from fnad.experimental.sparse._structure import (CuSparseEfficiencyWarning,
                                                 SparseEfficiencyError,
                                                 SparseEfficiencyWarning,
                                                 bcoo_broadcast_in_dim, bcoo_concatenate,
                                                 bcoo_dynamic_slice, bcoo_gather,
                                                 bcoo_reshape, bcoo_rev,
                                                 bcoo_slice, bcoo_squeeze, bcoo_update_layout)
from fnad.experimental.sparse.ad import grad, jacfwd, jacobian, jacrev, value_and_grad
from fnad.experimental.sparse.random import random_bcoo
from fnad.experimental.sparse.bcsr import (BCSR, bcsr_broadcast_in_dim, bcsr_concatenate,
                                           bcsr_dot_general, bcsr_eliminate_zeros, bcsr_extract,
                                           bcsr_fromdense, bcsr_sum_duplicates, bcsr_todense)
from fnad.experimental.sparse._base import JAXSparse
from fnad.experimental.sparse.coo import (COO, coo_fromdense, coo_matmat, coo_matvec,
                                          coo_todense)
from fnad.experimental.sparse.csr import (CSC, CSR, csr_fromdense, csr_matmat, csr_matvec,
                                          csr_todense)
from fnad.experimental.sparse.transform import sparsify
from fnad.experimental.sparse import linalg  # noqa: E402  (after the formats it uses)

__all__ = ["BCOO", "BCSR", "COO", "CSC", "CSR", "CuSparseEfficiencyWarning", "JAXSparse",
           "SparseEfficiencyError", "SparseEfficiencyWarning", "bcoo_broadcast_in_dim",
           "bcoo_concatenate", "bcoo_conv_general_dilated", "bcoo_dot_general",
           "bcoo_dot_general_sampled", "bcoo_dynamic_slice", "bcoo_eliminate_zeros", "bcoo_extract",
           "bcoo_fromdense", "bcoo_gather", "bcoo_multiply_dense", "bcoo_multiply_sparse",
           "bcoo_reduce_sum", "bcoo_reshape", "bcoo_rev", "bcoo_slice", "bcoo_sort_indices",
           "bcoo_spdot_general", "bcoo_squeeze", "bcoo_sum_duplicates", "bcoo_todense",
           "bcoo_transpose", "bcoo_update_layout", "bcsr_broadcast_in_dim", "bcsr_concatenate",
           "bcsr_dot_general", "bcsr_eliminate_zeros", "bcsr_extract", "bcsr_fromdense",
           "bcsr_sum_duplicates", "bcsr_todense", "coo_fromdense", "coo_matmat", "coo_matvec",
           "coo_todense", "csr_fromdense", "csr_matmat", "csr_matvec", "csr_todense", "empty",
           "eye", "grad", "jacfwd", "jacobian", "jacrev", "linalg", "random_bcoo", "sparsify",
           "todense", "value_and_grad"]
