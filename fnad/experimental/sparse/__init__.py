"""fnad.experimental.sparse: the BCOO (batched coordinate) sparse array of
jax.experimental.sparse and its core operations, composed from fnad.numpy / fnad.lax
operations (no new primitives), so grad (through the stored data and dense operands), vmap
and jit work on them.

`sparsify` runs a dense-array function on BCOO arguments (transform.py).

BCSR (bcsr.py) converts to and from dense arrays and BCOO; its products go through BCOO.

Not here (jax has them): COO / CSR, bcoo_spdot_general (sparse x sparse
products), reshape / slicing / concatenation / broadcast_in_dim of BCOO, update_layout,
sparse.linalg, sparse.random and comparisons.
"""
from fnad.experimental.sparse._products import (bcoo_dot_general, bcoo_multiply_dense,
                                                bcoo_multiply_sparse)
from fnad.experimental.sparse.bcoo import (BCOO, bcoo_eliminate_zeros, bcoo_extract,
                                           bcoo_fromdense, bcoo_reduce_sum, bcoo_sort_indices,
                                           bcoo_sum_duplicates, bcoo_todense, bcoo_transpose,
                                           empty, eye, todense)
from fnad.experimental.sparse.bcsr import BCSR, bcsr_fromdense, bcsr_todense
from fnad.experimental.sparse.transform import sparsify

__all__ = ["BCOO", "BCSR", "bcoo_dot_general", "bcoo_eliminate_zeros", "bcoo_extract",
           "bcoo_fromdense", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum",
           "bcoo_sort_indices", "bcoo_sum_duplicates", "bcoo_todense", "bcoo_transpose", "empty",
           "bcsr_fromdense", "bcsr_todense", "eye", "sparsify", "todense"]
