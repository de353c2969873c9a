"""Code generation for the numba backend: a jaxpr -> one Python module, compiled by numba.

(Work in progress: until the generator lands, `compile_jaxpr` interprets the jaxpr on
NumPy buffers with the reference implementations, like the numpy backend's jit.)
"""
from __future__ import annotations


def compile_jaxpr(closed):
    from fnad.backends.numpy_ref.compile import compile as interpret_compile
    return interpret_compile(closed)
