"""fnad.numpy's printing, file and buffer functions: array_str, array_repr, printoptions,
get_printoptions, set_printoptions, save, savez, load, frombuffer, fromstring, einsum_path
(fromiter and fromfile raise, as in JAX: they may read state, which a traced program must
not).

Printing and saving go through NumPy on the array's values; `load` returns an fnad array
(bfloat16 data, which NumPy saves as 2-byte void, comes back as bfloat16, as in JAX).
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.numpy._core import asarray

__all__ = ["array_repr", "array_str", "einsum_path", "frombuffer", "fromfile", "fromiter",
           "fromstring", "get_printoptions", "load", "printoptions", "save", "savez",
           "set_printoptions"]

printoptions = np.printoptions
get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
save = np.save
savez = np.savez


def array_str(a, max_line_width=None, precision=None, suppress_small=None) -> str:
    """NumPy's array_str of the values of `a`."""
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None) -> str:
    """NumPy's array_repr of the values of `arr`."""
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def load(file, *args, **kwargs):
    """np.load, an .npy array returned as an fnad array (bfloat16 restored)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):
            out = out.view(dtypes.bfloat16)
        try:
            return asarray(out)
        except TypeError:                                 # a dtype fnad has no arrays of
            return out
    return out


def frombuffer(buffer, dtype=float, count: int = -1, offset: int = 0):
    """The bytes of `buffer` as a 1-D fnad array of `dtype` (a copy)."""
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype=float, count: int = -1, *, sep: str):
    """The numbers in `string` separated by `sep`, as a 1-D fnad array."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def _impure(name: str):
    def fn(*args, **kwargs):
        raise NotImplementedError(
            f"fnad.numpy.{name}() is not implemented: it may read changing state, which a "
            f"traced program must not. Use fnad.numpy.asarray(numpy.{name}(...)) outside "
            "jitted code instead.")
    fn.__name__ = name
    return fn


fromiter = _impure("fromiter")
fromfile = _impure("fromfile")


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """NumPy's contraction order for `einsum` on operands of these shapes (only their
    shapes are read; "auto", the default, is NumPy's "greedy")."""
    shaped = [np.broadcast_to(np.zeros((), np.asarray(x).dtype), np.shape(x))
              for x in operands]
    return np.einsum_path(subscripts, *shaped,
                          optimize="greedy" if optimize == "auto" else optimize)
