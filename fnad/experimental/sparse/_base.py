"""JAXSparse: the base class of fnad's sparse arrays (BCOO, BCSR, COO, CSR, CSC), as
jax.experimental.sparse.JAXSparse.

It holds what every format shares: `shape`, `size`, `ndim`, `len()`, `.T`, the repr
`COO(float32[3, 4], nse=5)` (wrapped in the tracer's type name under a transformation),
`block_until_ready`, and no hash. Operations a format lacks raise NotImplementedError
naming the class, as in jax. A subclass must give `dtype`, `nse`, `todense`, `transpose`
and the pytree methods.
"""
from __future__ import annotations

import abc
import math
import operator
from collections.abc import Sequence

from fnad.core import Tracer

__all__ = ["JAXSparse", "check_format"]


def check_format(mat, cls, what: str, noun: str) -> None:
    """A TypeError naming the function `what` unless `mat` is a `cls` (a format class)."""
    if not isinstance(mat, cls):
        raise TypeError(f"{what} expects a {cls.__name__} {noun}, got {type(mat).__name__}")


class JAXSparse(abc.ABC):
    """Base class of the sparse array formats."""

    __array_priority__ = 200      # NumPy defers `ndarray @ sparse` to __rmatmul__
    __array_ufunc__ = None
    __hash__ = None               # type: ignore[assignment]

    shape: tuple

    def __init__(self, args, *, shape: Sequence[int]):
        self.shape = tuple(operator.index(s) for s in shape)

    @property
    @abc.abstractmethod
    def dtype(self): ...

    @property
    @abc.abstractmethod
    def nse(self) -> int: ...

    @abc.abstractmethod
    def todense(self): ...

    @abc.abstractmethod
    def transpose(self, axes=None): ...

    @abc.abstractmethod
    def tree_flatten(self): ...

    @classmethod
    @abc.abstractmethod
    def tree_unflatten(cls, aux_data, children): ...

    size = property(lambda self: math.prod(self.shape))
    ndim = property(lambda self: len(self.shape))
    T = property(lambda self: self.transpose())

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        name = type(self).__name__
        try:
            text = f"{name}({self.dtype}{list(self.shape)}, nse={self.nse})"
        except Exception:
            text = f"{name}(<invalid>)"
        if isinstance(getattr(self, "data", None), Tracer):
            text = f"{type(self.data).__name__}[{text}]"
        return text

    def block_until_ready(self):
        for leaf in self.tree_flatten()[0]:
            leaf.block_until_ready()
        return self

    # Not every format has these (jax's COO, CSR and CSC have none of them).
    def _missing(self, what: str):
        raise NotImplementedError(f"{type(self).__name__}.{what} is not implemented (as in "
                                  "jax); convert with .todense() or use BCOO")

    def sum(self, *args, **kwargs):
        self._missing("sum")

    def __neg__(self):
        self._missing("__neg__")

    def __pos__(self):
        self._missing("__pos__")

    def __matmul__(self, other):
        self._missing("__matmul__")

    def __rmatmul__(self, other):
        self._missing("__rmatmul__")

    def __mul__(self, other):
        self._missing("__mul__")

    def __rmul__(self, other):
        self._missing("__rmul__")

    def __add__(self, other):
        self._missing("__add__")

    def __radd__(self, other):
        self._missing("__radd__")

    def __sub__(self, other):
        self._missing("__sub__")

    def __rsub__(self, other):
        self._missing("__rsub__")

    def __getitem__(self, item):
        self._missing("__getitem__")
