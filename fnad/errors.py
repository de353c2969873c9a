"""fnad.errors: the exceptions fnad raises that user code may catch, as jax.errors.

ConcretizationTypeError (and its Tracer{Bool,Integer}ConversionError kinds): a traced
value was needed as a Python value. TracerArrayConversionError: a tracer was converted to a
NumPy array. UnexpectedTracerError: a tracer escaped its transformation. JaxprTypeError:
an ill-typed jaxpr. fnad's own: ShapeError (a shape or dtype rule failed, naming the
primitive and the user's line) and NoImplementationError (a primitive without an
implementation on a backend, listing those that have one).
"""
from fnad.core import (ConcretizationTypeError, NoImplementationError,  # noqa: F401
                       ShapeError, TracerArrayConversionError, TracerBoolConversionError,
                       TracerIntegerConversionError, UnexpectedTracerError)
from fnad.ir import JaxprTypeError  # noqa: F401

__all__ = ["ConcretizationTypeError", "JaxprTypeError", "NoImplementationError",
           "ShapeError", "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]
