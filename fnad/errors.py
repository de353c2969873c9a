"""fnad.errors: the exceptions fnad raises that user code may catch, as jax.errors.

JAXTypeError (a TypeError) is the base of: ConcretizationTypeError (and its
Tracer{Bool,Integer}ConversionError kinds): a traced value was needed as a Python value;
TracerArrayConversionError: a tracer was converted to a NumPy array; UnexpectedTracerError:
a tracer escaped its transformation. JAXIndexError (an IndexError) is the base of
NonConcreteBooleanIndexError: `x[mask]` with a traced boolean mask. JaxprTypeError: an
ill-typed jaxpr. fnad's own: ShapeError (a shape or dtype rule failed, naming the primitive
and the user's line) and NoImplementationError (a primitive without an implementation on a
backend, listing those that have one).

Defined for code that catches them, never raised by fnad: KeyReuseError (fnad has no
key-reuse checker), JaxRuntimeError (JAX's error from a failed XLA computation; fnad's
backends raise the underlying Python exception) and InconclusiveDimensionOperation (JAX's
shape-polymorphism error; fnad has no symbolic shapes).

Differences from jax: TracerIntegerConversionError is also a ConcretizationTypeError
(catching the latter catches both).
"""
from fnad.core import (ConcretizationTypeError, JAXIndexError, JAXTypeError,  # noqa: F401
                       NoImplementationError, ShapeError, TracerArrayConversionError,
                       TracerBoolConversionError, TracerIntegerConversionError,
                       UnexpectedTracerError)
from fnad.ir import JaxprTypeError  # noqa: F401
from fnad.numpy._indexing import NonConcreteBooleanIndexError  # noqa: F401

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError",
           "JAXTypeError", "JaxRuntimeError", "JaxprTypeError", "KeyReuseError",
           "NoImplementationError", "NonConcreteBooleanIndexError", "ShapeError",
           "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]


class KeyReuseError(JAXTypeError):
    """A PRNG key used twice (jax's key-reuse checker; fnad has none, so never raised)."""


class JaxRuntimeError(RuntimeError):
    """A failed compiled computation (jax's XLA runtime error; never raised by fnad)."""


class InconclusiveDimensionOperation(Exception):
    """A symbolic-shape comparison without an answer (jax's shape polymorphism; never raised
    by fnad)."""
