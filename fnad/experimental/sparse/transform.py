"""sparsify: run a function written for dense arrays on BCOO arguments
(jax.experimental.sparse.sparsify).

`sparsify(f)(*args)` traces `f` with each BCOO argument standing in as a dense array of its
shape and dtype, then evaluates the jaxpr equation by equation: an equation with no sparse
operand is bound as usual; one with a sparse operand goes through its sparse rule below,
which keeps the result sparse where the operation maps zeros to zeros (elementwise
functions with f(0) = 0, products with a dense operand, sums over axes, transposes) or
computes a dense result where the sparse operand meets a dense one in a product
(`dot_general`); convolutions (`conv_general_dilated`, _conv.py) and the shape operations
(slice, dynamic_slice, rev, squeeze, reshape, broadcast_in_dim, concatenate) keep it sparse
(_structure.py). An operation without a rule (one that would densify, as `exp`) raises
NotImplementedError, as in jax. Nested jit calls are evaluated the same way. Because the
rules are compositions of fnad operations, a sparsified function works under grad, vmap
and jit.
"""
from __future__ import annotations

import functools

import fnad.numpy as jnp
from fnad import core, tree_util
from fnad.experimental.sparse._products import (add, bcoo_dot_general, bcoo_multiply_sparse,
                                                divide, multiply)
from fnad.experimental.sparse.bcoo import BCOO, bcoo_reduce_sum, bcoo_transpose
from fnad.ir import Var
from fnad.tracing import flatten_fun, trace_to_jaxpr

__all__ = ["sparsify"]

# f(0) = 0: applied to the stored entries, the result keeps the pattern
_ZERO_PRESERVING = ("neg", "sin", "tan", "tanh", "abs", "sqrt", "cbrt", "sign", "expm1",
                    "log1p", "asin", "atan", "sinh", "asinh", "atanh", "real", "imag", "conj",
                    "copy", "round", "floor", "ceil", "stop_gradient", "erf", "erf_inv")


def _unary(prim):
    def rule(x, **params):
        return x._with_data(prim.bind(x.data, **params))
    return rule


def _integer_pow(prim):
    def rule(x, *, y):
        if y <= 0:
            raise NotImplementedError(f"sparse rule for integer_pow with exponent {y} is not "
                                      "implemented: 0 ** y is not 0, so the result is dense")
        return x._with_data(prim.bind(x.data, y=y))
    return rule


def _convert(prim):
    def rule(x, **params):
        return x._with_data(prim.bind(x.data, **params))
    return rule


def _mul(x, y):
    if isinstance(x, BCOO) and isinstance(y, BCOO):
        return bcoo_multiply_sparse(x, y)
    return multiply(x, y)


def _add(x, y):
    return add(x, y)


def _sub(x, y):
    return add(x, -y)


def _div(x, y):
    if not isinstance(x, BCOO):
        raise NotImplementedError("sparse rule for div with a sparse divisor is not "
                                  "implemented (its implicit zeros would divide)")
    return divide(x, y)


def _dot_general(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None,
                 **_):
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        raise NotImplementedError("sparse rule for dot_general of two sparse operands is not "
                                  "implemented; densify one with .todense()")
    out = bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers)
    return out if preferred_element_type is None else out.astype(preferred_element_type)


def _conv_general_dilated(lhs, rhs, **params):
    from fnad.experimental.sparse._conv import bcoo_conv_general_dilated
    return bcoo_conv_general_dilated(lhs, rhs, **params)


def _reduce_sum(x, *, axes, **_):
    out = bcoo_reduce_sum(x, axes=tuple(axes))
    return out.data.sum() if out.shape == () else out


def _transpose(x, *, permutation):
    return bcoo_transpose(x, permutation=tuple(permutation))


def _structural() -> dict:
    """The shape primitives on one BCOO operand (concatenate: all BCOO), via _structure.py."""
    from fnad.experimental.sparse import _structure as st

    def dynamic_slice(x, *starts, slice_sizes):
        return st.bcoo_dynamic_slice(x, starts, slice_sizes)

    def concatenate(*xs, dimension):
        if not all(isinstance(x, BCOO) for x in xs):
            raise NotImplementedError("sparse rule for concatenate of sparse and dense "
                                      "operands is not implemented; make them all sparse "
                                      "(BCOO.fromdense) or all dense")
        return st.bcoo_concatenate(xs, dimension=dimension)
    return dict(
        slice=lambda x, **p: st.bcoo_slice(x, **p),
        dynamic_slice=dynamic_slice,
        rev=lambda x, *, dimensions: st.bcoo_rev(x, dimensions),
        squeeze=lambda x, *, dimensions: st.bcoo_squeeze(x, dimensions=dimensions),
        reshape=lambda x, *, new_sizes, **_: st.bcoo_reshape(x, new_sizes=new_sizes),
        broadcast_in_dim=lambda x, *, shape, broadcast_dimensions, **_:
            st.bcoo_broadcast_in_dim(x, shape=shape, broadcast_dimensions=broadcast_dimensions),
        concatenate=concatenate)


def _rules() -> dict:
    from fnad.primitives import elementwise, logic, reductions, shape_ops
    from fnad.primitives import linalg as linalg_prims
    prims = {}
    for mod in (elementwise, logic, reductions, shape_ops, linalg_prims):
        for name, value in vars(mod).items():
            if name.endswith("_p") and isinstance(value, core.Primitive):
                prims[value.name] = value
    rules = {name: _unary(prims[name]) for name in _ZERO_PRESERVING if name in prims}
    rules.update(integer_pow=_integer_pow(prims["integer_pow"]),
                 convert_element_type=_convert(prims["convert_element_type"]),
                 mul=_mul, add=_add, sub=_sub, div=_div, dot_general=_dot_general,
                 conv_general_dilated=_conv_general_dilated,
                 reduce_sum=_reduce_sum, transpose=_transpose)
    rules.update(_structural())
    return rules


_RULES: dict | None = None


def _eval(jaxpr, consts, args) -> list:
    global _RULES
    if _RULES is None:
        _RULES = _rules()
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [env[v] if type(v) is Var else v.val for v in eqn.invars]
        name = eqn.primitive.name
        if not any(isinstance(x, BCOO) for x in ins):
            outs = eqn.primitive.bind(*ins, **eqn.params)
        elif name == "jit":
            sub = eqn.params["jaxpr"]
            outs = _eval(sub.jaxpr, sub.consts, ins)
        elif name in _RULES:
            outs = _RULES[name](*ins, **eqn.params)
        else:
            raise NotImplementedError(
                f"sparse rule for {name} is not implemented (it would give a dense result, "
                "or fnad has no sparse form of it); convert its sparse operands with "
                ".todense() if a dense result is meant")
        if not eqn.primitive.multiple_results and name != "jit":
            outs = [outs]
        env.update(zip(eqn.outvars, outs))
    return [env[v] if type(v) is Var else v.val for v in jaxpr.outvars]


def sparsify(f, use_tracer: bool = False):
    """`f` taking BCOO arrays wherever it takes arrays (any pytree positions), computing
    with sparse rules where the operations allow it; results are BCOO or dense arrays.
    `use_tracer` is accepted for jax's signature (fnad always evaluates a traced jaxpr)."""
    del use_tracer
    name = getattr(f, "__name__", type(f).__name__)

    @functools.wraps(f)
    def sparsified(*args, **kwargs):
        leaves, in_tree = tree_util.tree_flatten((args, kwargs),
                                                 is_leaf=lambda x: isinstance(x, BCOO))
        avals = [core.ShapedArray(tuple(x.shape), x.dtype) if isinstance(x, BCOO)
                 else core.get_aval(x) for x in leaves]
        flat_fun, out_tree = flatten_fun(f, in_tree)
        closed = trace_to_jaxpr(flat_fun, avals, f"sparsify of {name}")
        outs = _eval(closed.jaxpr, closed.consts,
                     [x if isinstance(x, BCOO) else jnp.asarray(x) for x in leaves])
        return tree_util.tree_unflatten(out_tree[0], outs)
    return sparsified
