"""The primitive spec table: one entry per test case of a primitive.

Each family has a module here (`spec_<family>.py`) with a list `SPECS`;
tests/test_primitives.py collects them all and checks, for every primitive:
the numpy-backend value against a plain NumPy reference, abstract evaluation
(shape and dtype), the JVP against central finite differences in float64,
the transpose of linear arguments by the dot-product test, and (where jax is
installed) values and first and second derivatives against jax.lax.
"""
from __future__ import annotations

import dataclasses
from typing import Any
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Arg:
    """How to draw one argument: shape, dtype and the domain of its values.

    `domain` is (low, high) for uniform floats / integers in [low, high), or a
    callable `rng -> np.ndarray` for anything special (sorted indices, permutations).
    `static` args are passed as given (a Python value) and never differentiated.
    """
    shape: tuple = ()
    dtype: Any = np.float32
    domain: Any = (-2.0, 2.0)
    static: Any = None

    def draw(self, rng: np.random.Generator):
        if self.static is not None:
            return self.static
        if callable(self.domain):
            return np.asarray(self.domain(rng))
        dt = np.dtype(self.dtype)
        lo, hi = self.domain
        if dt == np.bool_:
            return rng.random(self.shape) < 0.5
        if dt.kind in "iu":
            return rng.integers(lo, hi, size=self.shape).astype(dt)
        if dt.kind == "c":
            re = rng.uniform(lo, hi, self.shape)
            im = rng.uniform(lo, hi, self.shape)
            return (re + 1j * im).astype(dt)
        return rng.uniform(lo, hi, self.shape).astype(dt)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One test case of one primitive.

    prim:   the Primitive under test (coverage: every primitive needs a spec).
    fun:    calls the fnad wrapper, e.g. `lambda x: lax.sin(x)`; positional args
            are drawn from `args` (static ones passed as their given value).
    ref:    the same computation in plain NumPy on NumPy arrays.
    jax_fun: the same computation with jax.lax / jax.numpy (taking `jax` as first
            argument: `lambda jax, x: jax.lax.sin(x)`); None = no jax comparison.
    linear: indices of args in which `fun` is linear (transpose dot-product test).
    diff:   indices of args to differentiate; None = every inexact non-static arg;
            () = not differentiable (integer/boolean output, piecewise constant).
    fd_eps / fd_rtol / fd_atol: finite-difference step and tolerances (float64).
    rtol / atol: tolerance of the value check (in the arg dtypes).
    name:   test id suffix.
    """
    prim: Any
    fun: Callable
    ref: Callable
    args: tuple
    jax_fun: Callable | None = None
    linear: tuple = ()
    diff: tuple | None = None
    rtol: float = 1e-5
    atol: float = 1e-6
    fd_eps: float = 1e-6
    fd_rtol: float = 1e-5
    fd_atol: float = 1e-6
    second_order: bool = True
    name: str = ""

    @property
    def id(self) -> str:
        return f"{self.prim.name}-{self.name}" if self.name else self.prim.name
